//! The component's side: the runtime's `HostImports` over
//! [`FakeHost`](crate::FakeHost), in the host's types.

/// Implement the runtime's `HostImports` (crate `$r`:
/// `session_switch_runtime`, or `crate` in the runtime's own unit tests)
/// for [`FakeHost`](crate::FakeHost).
#[macro_export]
macro_rules! host_imports {
    ($r:tt) => {
        impl $r::HostImports for $crate::FakeHost {
            fn meta_get(&mut self, key: &str) -> Result<Option<String>, $r::Failure> {
                self.import(|s| s.meta_get(key))
            }

            fn meta_delete(&mut self, key: &str) -> Result<bool, $r::Failure> {
                self.import(|s| s.meta_delete(key))
            }

            fn meta_set(&mut self, key: &str, value: &str) -> Result<(), $r::Failure> {
                self.import(|s| s.meta_set(key, value))
            }

            fn session_exists(&mut self, id: &str) -> Result<bool, $r::Failure> {
                self.import(|s| s.session_exists(id))
            }

            fn history(
                &mut self,
                session_id: &str,
                agent: &str,
                limit: Option<u32>,
            ) -> Result<Vec<$r::HistoryRow>, $r::Failure> {
                self.import(|s| s.history(session_id, agent, limit))
            }

            fn now(&mut self) -> f64 {
                self.state().now()
            }

            fn send(&mut self, plan: &$r::SendPlan) -> Result<$r::Sent, $r::Failure> {
                let sent = self.import(|s| s.send($crate::plan_of!(plan)))?;
                Ok($r::Sent {
                    message_id: sent.message_id,
                    room: sent.room,
                    record_replaced: sent.record_replaced,
                })
            }

            fn data_version(&mut self) -> Result<Option<$r::DataVersion>, $r::Failure> {
                Ok(self.state().data_version())
            }
        }
    };
}

#[cfg(feature = "runtime")]
host_imports!(session_switch_runtime);
