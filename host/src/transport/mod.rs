//! ejabberd transports: post a body to the MUC room and check the sender.
