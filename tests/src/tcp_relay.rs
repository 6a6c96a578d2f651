//! A TCP relay in front of ejabberd's client port that, when a client's
//! side closes, keeps the server's side open: what the server sees of a
//! machine that lost power or its network (no FIN ever arrives), so the
//! dead client's session and room seat stay until something replaces them.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// The relay; every connection it holds is closed when it is dropped.
pub struct HoldingRelay {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    /// The server sides of every connection, kept open after the client left.
    held: Arc<Mutex<Vec<TcpStream>>>,
}

impl HoldingRelay {
    /// A relay on a free loopback port to `upstream`.
    ///
    /// # Panics
    /// When it cannot bind a port.
    pub fn start(upstream: SocketAddr) -> HoldingRelay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        listener.set_nonblocking(true).expect("non-blocking accept");
        let addr = listener.local_addr().expect("relay address");
        let stop = Arc::new(AtomicBool::new(false));
        let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (stop2, held2) = (Arc::clone(&stop), Arc::clone(&held));
        thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let _ = client.set_nonblocking(false);
                        let Ok(server) = TcpStream::connect(upstream) else {
                            continue;
                        };
                        held2.lock().unwrap().push(server.try_clone().unwrap());
                        relay(client, server);
                    }
                    Err(_) => thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        HoldingRelay { addr, stop, held }
    }

    /// `127.0.0.1:port`, for `[bot] server`.
    pub fn addr(&self) -> String {
        self.addr.to_string()
    }
}

/// Copy both ways; the client's end of stream is not passed on, and what
/// the server sends after it is read and dropped.
fn relay(client: TcpStream, server: TcpStream) {
    let (mut c_read, mut s_write) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    thread::spawn(move || {
        let _ = copy(&mut c_read, &mut s_write);
    });
    let (mut s_read, mut c_write) = (server, client);
    thread::spawn(move || {
        let mut buf = [0u8; 8192];
        let mut client_gone = false;
        loop {
            match s_read.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) if !client_gone => {
                    if c_write.write_all(&buf[..n]).is_err() {
                        client_gone = true;
                    }
                }
                Ok(_) => {}
            }
        }
        let _ = c_write.shutdown(Shutdown::Both);
    });
}

fn copy(from: &mut TcpStream, to: &mut TcpStream) -> std::io::Result<()> {
    let mut buf = [0u8; 8192];
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        to.write_all(&buf[..n])?;
    }
}

impl Drop for HoldingRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for s in self.held.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}
