//! `install-legacy-script`: a small Python script at the legacy
//! `xmpp_session_bridge.py`'s path that runs this command with the same
//! arguments, so the agents' prompts and scripts that call the legacy tool
//! need no change. It `exec`s the command: the output and the exit status
//! are the command's own.

use session_switch::Failure;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The line that marks a script this command wrote (and may replace).
const MARKER: &str = "# Written by `xmpp-session-bridge install-legacy-script`";

/// Where agents call the legacy tool: `$HERMES_HOME/scripts/xmpp_session_bridge.py`.
pub fn default_path() -> PathBuf {
    session_switch::hermes_home()
        .join("scripts")
        .join("xmpp_session_bridge.py")
}

/// The running command's own path, which the script runs.
///
/// Errors (kind `store`): the path cannot be found.
pub fn this_command() -> Result<PathBuf, Failure> {
    std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| Failure::store(format!("cannot find this command's own path: {e}")))
}

/// The script's text: run `command` (else `xmpp-session-bridge` on PATH,
/// when `command` has gone) with the arguments given.
///
/// Errors (kind `bad-input`): a `command` path that is not UTF-8.
pub fn script(command: &Path) -> Result<String, Failure> {
    let command = command.to_str().ok_or_else(|| {
        Failure::bad_input(format!(
            "this command's path {} is not UTF-8",
            command.display()
        ))
    })?;
    // A JSON string is a Python string literal too.
    let literal = serde_json::to_string(command).expect("a string serialises");
    Ok(format!(
        r#"#!/usr/bin/env python3
{MARKER}: the legacy
# xmpp_session_bridge.py's path, kept for the prompts and scripts that call
# it. It runs session-switch's command with the same arguments; its output
# and exit status are the command's.
import os
import shutil
import sys

COMMAND = {literal}
if not os.access(COMMAND, os.X_OK):
    COMMAND = shutil.which("xmpp-session-bridge") or COMMAND
try:
    os.execv(COMMAND, [COMMAND] + sys.argv[1:])
except OSError as e:
    sys.stderr.write("xmpp_session_bridge.py: cannot run %s: %s\n" % (COMMAND, e))
    sys.exit(1)
"#
    ))
}

/// Write the script for `command` at `path` (its folder made when
/// missing); whether a file was there. A file there that this command did
/// not write is replaced only with `force`.
///
/// Errors: a file there that is not such a script, without `force` (kind
/// `bad-input`, nothing written); the folder or the file cannot be written
/// (kind `store`).
pub fn install(path: &Path, command: &Path, force: bool) -> Result<bool, Failure> {
    let text = script(command)?;
    let there = match std::fs::read(path) {
        Ok(old) => {
            let ours = String::from_utf8_lossy(&old).contains(MARKER);
            if !ours && !force {
                return Err(Failure::bad_input(format!(
                    "{} exists and is not a script this command wrote (the legacy tool \
                     itself?): nothing written; --force replaces it",
                    path.display()
                )));
            }
            true
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => {
            return Err(Failure::store(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    let cannot =
        |e: std::io::Error| Failure::store(format!("cannot write {}: {e}", path.display()));
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(folder).map_err(cannot)?;
    // Written beside it and renamed over it: a caller never runs half a
    // script.
    let mut temp = tempfile::NamedTempFile::new_in(folder).map_err(cannot)?;
    temp.write_all(text.as_bytes()).map_err(cannot)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(temp.path(), std::fs::Permissions::from_mode(0o755))
        .map_err(cannot)?;
    temp.persist(path).map_err(|e| cannot(e.error))?;
    Ok(there)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_runs_the_command_it_names_with_the_arguments_given() {
        let text = script(Path::new("/opt/a \"b\"/xmpp-session-bridge")).unwrap();
        assert!(text.starts_with("#!/usr/bin/env python3\n"), "{text}");
        assert!(
            text.contains(r#"COMMAND = "/opt/a \"b\"/xmpp-session-bridge""#),
            "{text}"
        );
        assert!(text.contains("os.execv(COMMAND, [COMMAND] + sys.argv[1:])"));
        assert!(text.contains(MARKER));
    }

    #[test]
    fn another_file_is_kept_unless_forced_and_our_own_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("scripts/xmpp_session_bridge.py");
        let command = Path::new("/usr/bin/xmpp-session-bridge");
        assert!(!install(&path, command, false).unwrap(), "nothing there");
        let first = std::fs::read_to_string(&path).unwrap();
        assert!(install(&path, command, false).unwrap(), "ours: replaced");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), first);
        std::fs::write(&path, "print('the legacy tool')\n").unwrap();
        let e = install(&path, command, false).unwrap_err();
        assert_eq!(e.kind, session_switch::FailureKind::BadInput);
        assert!(e.message.contains("--force"), "{}", e.message);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "print('the legacy tool')\n",
            "nothing written"
        );
        assert!(install(&path, command, true).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), first);
    }
}
