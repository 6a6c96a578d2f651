//! The policy file's hot swap as a face starts it: watched or reloaded with
//! this config's settings, so a new component serves only once it accepts
//! them (`configure`), beside the runtime's own checks (docs/src/design/where-the-time-goes.md).

use crate::bridge::Bridge;
use crate::from_config;
use session_switch_runtime::{Failure, WatchOptions, Watcher};
use std::path::Path;

impl Bridge {
    /// Watch the policy file in use ([`Bridge::policy_file`]) and swap in
    /// each new version that passes every check, `configure` with this
    /// config's settings included; a rejected file leaves the old policy
    /// serving. `None` for the embedded policy, which has no file. Instances
    /// follow the swaps; [`Watcher::stop`] ends the watch.
    pub fn watch_policy(&self) -> Option<Watcher> {
        let path = self.policy_file()?;
        let options = WatchOptions {
            settings: Some(from_config::settings(self.config())),
            ..WatchOptions::default()
        };
        Some(self.policy().watch(path, options))
    }

    /// Swap in the policy file `path` (default: the one in use) if it
    /// passes every check, `configure` with this config's settings
    /// included; the old policy keeps serving on any failure. Returns the
    /// new version, or `None` when the bytes are unchanged.
    ///
    /// Errors: kind `bad-input` for the embedded policy without a `path`;
    /// the runtime's for a file that cannot be read or is refused.
    pub fn reload_policy(&self, path: Option<&Path>) -> Result<Option<String>, Failure> {
        let Some(path) = path.or(self.policy_file()) else {
            return Err(Failure::bad_input(
                "the embedded policy has no file to reload: pass a path".to_owned(),
            ));
        };
        let settings = from_config::settings(self.config());
        let report = self.policy().reload(path, Some(&settings))?;
        Ok(report.map(|r| r.info.version))
    }
}
