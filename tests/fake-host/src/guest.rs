//! The guest's side: its `Host` trait over [`FakeHost`](crate::FakeHost),
//! answering in the guest's generated types.

/// Implement the guest's `Host` (crate `$g`: `session_switch_policy`, or
/// `crate` in the guest's own unit tests) for [`FakeHost`](crate::FakeHost),
/// with the conversions it needs as functions beside it: WIT `failure` and
/// `failure-kind` both ways, Hermes's role as WIT `role`, and `summaries`
/// (the rows as the guest sees them, their prefixes cut by `$prefix`: the
/// runtime's own where it is at hand, so the benches' native side does what
/// the component's host does).
#[macro_export]
macro_rules! guest_host {
    ($g:tt, $prefix:path) => {
        /// WIT `failure-kind`, host → guest.
        pub fn kind_to_guest(kind: $crate::contract::failure::FailureKind) -> $g::FailureKind {
            use $crate::contract::failure::FailureKind as K;
            match kind {
                K::BadInput => $g::FailureKind::BadInput,
                K::UnknownAgent => $g::FailureKind::UnknownAgent,
                K::NotAccepted => $g::FailureKind::NotAccepted,
                K::Busy => $g::FailureKind::Busy,
                K::UnknownOutcome => $g::FailureKind::UnknownOutcome,
                K::Store => $g::FailureKind::Store,
                K::Transport => $g::FailureKind::Transport,
                K::Policy => $g::FailureKind::Policy,
            }
        }

        /// WIT `failure-kind`, guest → host.
        pub fn kind_from_guest(kind: $g::FailureKind) -> $crate::contract::failure::FailureKind {
            use $crate::contract::failure::FailureKind as K;
            match kind {
                $g::FailureKind::BadInput => K::BadInput,
                $g::FailureKind::UnknownAgent => K::UnknownAgent,
                $g::FailureKind::NotAccepted => K::NotAccepted,
                $g::FailureKind::Busy => K::Busy,
                $g::FailureKind::UnknownOutcome => K::UnknownOutcome,
                $g::FailureKind::Store => K::Store,
                $g::FailureKind::Transport => K::Transport,
                $g::FailureKind::Policy => K::Policy,
            }
        }

        /// WIT `failure`, host → guest (a scripted host failure for the
        /// native side).
        pub fn failure_to_guest(f: &$crate::contract::failure::Failure) -> $g::Failure {
            $g::Failure {
                kind: kind_to_guest(f.kind),
                message: f.message.clone(),
            }
        }

        /// WIT `failure`, guest → host.
        pub fn failure_from_guest(f: $g::Failure) -> $crate::contract::failure::Failure {
            $crate::contract::failure::Failure::new(kind_from_guest(f.kind), f.message)
        }

        /// Hermes's free-text `messages.role` as the guest's WIT `role`,
        /// through the contract's one mapping
        /// (`session_switch_contract::role::Role::of`).
        pub fn role_to_guest(role: &str) -> $g::Role {
            use $crate::contract::role::Role;
            match Role::of(role) {
                Role::User => $g::Role::User,
                Role::Assistant => $g::Role::Assistant,
                Role::Tool => $g::Role::Tool,
                Role::System => $g::Role::System,
                Role::Other => $g::Role::Other,
            }
        }

        /// What the guest sees of `rows` (WIT `row-summaries`), built as
        /// the runtime's host builds it (`apply::summaries`): each row's
        /// id, its role, the first `prefix_chars` characters of the text
        /// Hermes sends for it (`HistoryRow::sent_text`, cut by `$prefix`),
        /// the provenance flag; the string sized once.
        pub fn summaries(
            rows: &[$crate::contract::history::HistoryRow],
            prefix_chars: u32,
        ) -> $g::RowSummaries {
            let heads: Vec<&str> = rows
                .iter()
                .map(|row| $prefix(row.sent_text(), prefix_chars))
                .collect();
            let bytes = heads.iter().map(|h| h.len()).sum();
            let mut out = $g::RowSummaries::with_capacity(rows.len(), bytes);
            for (row, head) in rows.iter().zip(heads) {
                out.push(row.id, role_to_guest(&row.role), head, row.bridge_wrote);
            }
            out
        }

        /// The native side: the guest's `Host` trait, answering in the
        /// guest's types.
        impl $g::Host for $crate::FakeHost {
            fn meta_get(&mut self, key: &str) -> Result<Option<String>, $g::Failure> {
                self.import(|s| s.meta_get(key))
                    .map_err(|f| failure_to_guest(&f))
            }

            fn meta_delete(&mut self, key: &str) -> Result<bool, $g::Failure> {
                self.import(|s| s.meta_delete(key))
                    .map_err(|f| failure_to_guest(&f))
            }

            fn meta_set(&mut self, key: &str, value: &str) -> Result<(), $g::Failure> {
                self.import(|s| s.meta_set(key, value))
                    .map_err(|f| failure_to_guest(&f))
            }

            fn session_exists(&mut self, session_id: &str) -> Result<bool, $g::Failure> {
                self.import(|s| s.session_exists(session_id))
                    .map_err(|f| failure_to_guest(&f))
            }

            /// The rows as summaries cut to `prefix_chars` characters, the
            /// way the WIT `host.history` describes them (the runtime builds
            /// its own); `prefix_chars` kept in `GuestSeen`.
            fn history(
                &mut self,
                session_id: &str,
                agent: &str,
                limit: Option<u32>,
                prefix_chars: u32,
            ) -> Result<$g::RowSummaries, $g::Failure> {
                self.guest().prefix_chars.push(prefix_chars);
                let rows = self
                    .import(|s| s.history(session_id, agent, limit))
                    .map_err(|f| failure_to_guest(&f))?;
                Ok(summaries(&rows, prefix_chars))
            }

            fn now(&mut self) -> f64 {
                self.state().now()
            }

            fn send(&mut self, plan: &$g::SendPlan) -> Result<$g::Sent, $g::Failure> {
                match self.import(|s| s.send($crate::plan_of!(plan))) {
                    Ok(sent) => Ok($g::Sent {
                        message_id: sent.message_id,
                        room: sent.room,
                        record_replaced: sent.record_replaced,
                    }),
                    Err(f) => Err(failure_to_guest(&f)),
                }
            }

            fn log(&mut self, level: $g::LogLevel, message: &str) {
                self.guest()
                    .logs
                    .push((format!("{level:?}"), message.to_owned()));
            }
        }
    };
}

#[cfg(feature = "policy")]
crate::guest_host!(session_switch_policy, session_switch_runtime::prefix);
