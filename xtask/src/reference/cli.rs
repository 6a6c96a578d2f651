//! `cli.md` and the man page, from the clap definition the binary parses
//! with (one definition of the flags, as ripgrep's `--help` and man page).

use super::markdown::{self, banner, cell};
use anyhow::Result;
use clap::{Arg, Command, CommandFactory};

// The CLI's argument definitions, the very file its binary compiles: the
// CLI crate itself links the runtime, which xtask must not (see Cargo.toml).
#[allow(dead_code)]
#[path = "../../../host/cli/src/args.rs"]
mod args;

/// The `xmpp-session-bridge` command, built (usage and globals resolved).
pub fn command() -> Command {
    let mut command = args::Cli::command();
    command.build();
    command
}

/// The man page, section 1 (roff), with no date in it so it only changes
/// when the flags do.
pub fn man_page() -> Result<String> {
    let mut out = Vec::new();
    clap_mangen::Man::new(command()).render(&mut out)?;
    Ok(String::from_utf8(out)?)
}

/// Every subcommand with its usage, arguments and options.
pub fn markdown() -> String {
    let mut root = command();
    let name = root.get_name().to_string();
    let mut out = banner("the CLI's clap definition (host/cli/src/args.rs)");
    out.push_str(&format!("# `{name}` command line\n\n"));
    out.push_str(&markdown::prose(&help_text(&root)));
    out.push_str(&format!(
        "\n\nThe man page, `{name}.1`, says the same in roff: \
         `man docs/src/reference/{name}.1`.\n"
    ));
    out.push_str(&format!("\n```text\n{}\n```\n", usage(&mut root)));
    out.push_str("\n## Options of every command\n\n");
    out.push_str(&options_table(
        root.get_arguments().filter(|a| !a.is_positional()),
    ));
    out.push_str("\n## Commands\n\n");
    for sub in root.get_subcommands().filter(|s| s.get_name() != "help") {
        out.push_str(&format!(
            "- [`{0}`](#{1}): {2}\n",
            sub.get_name(),
            anchor(&format!("{name} {}", sub.get_name())),
            sub.get_about().map(|a| a.to_string()).unwrap_or_default()
        ));
    }
    let subs: Vec<Command> = root
        .get_subcommands()
        .filter(|s| s.get_name() != "help")
        .cloned()
        .collect();
    for mut sub in subs {
        out.push_str(&format!("\n## `{name} {}`\n\n", sub.get_name()));
        out.push_str(&markdown::prose(&help_text(&sub)));
        out.push_str(&format!("\n\n```text\n{}\n```\n", usage(&mut sub)));
        let positionals: Vec<&Arg> = sub
            .get_arguments()
            .filter(|a| a.is_positional() && !is_builtin(a))
            .collect();
        if !positionals.is_empty() {
            out.push_str("\nArguments:\n\n");
            for arg in positionals {
                let required = if arg.is_required_set() {
                    ""
                } else {
                    " (optional)"
                };
                out.push_str(&format!(
                    "- `{}`{required}: {}\n",
                    value_name(arg),
                    arg_help(arg)
                ));
            }
        }
        let own: Vec<&Arg> = sub
            .get_arguments()
            .filter(|a| !a.is_positional() && !a.is_global_set() && !is_builtin(a))
            .collect();
        if !own.is_empty() {
            out.push_str("\nOptions:\n\n");
            out.push_str(&options_table(own.into_iter()));
        }
    }
    out
}

/// The about text, then the long about when there is one.
fn help_text(command: &Command) -> String {
    command
        .get_long_about()
        .or(command.get_about())
        .map(|a| a.to_string())
        .unwrap_or_default()
        .trim_end()
        .to_string()
}

fn usage(command: &mut Command) -> String {
    command.render_usage().to_string()
}

/// `--help`, `--version`: clap's own, the same on every command.
fn is_builtin(arg: &Arg) -> bool {
    matches!(arg.get_id().as_str(), "help" | "version")
}

fn value_name(arg: &Arg) -> String {
    arg.get_value_names()
        .map(|names| {
            names
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| arg.get_id().as_str().to_uppercase())
}

fn arg_help(arg: &Arg) -> String {
    cell(
        &arg.get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default(),
    )
}

/// A table of options: flag (with its value), what it does.
fn options_table<'a>(args: impl Iterator<Item = &'a Arg>) -> String {
    let mut out = String::from("| option | meaning |\n| --- | --- |\n");
    for arg in args.filter(|a| !is_builtin(a)) {
        let mut flag = Vec::new();
        if let Some(short) = arg.get_short() {
            flag.push(format!("-{short}"));
        }
        if let Some(long) = arg.get_long() {
            flag.push(format!("--{long}"));
        }
        let mut flag = flag.join(", ");
        if arg.get_action().takes_values() {
            flag.push_str(&format!(" {}", value_name(arg)));
        }
        out.push_str(&format!("| `{flag}` | {} |\n", arg_help(arg)));
    }
    out
}

/// The anchor mdBook gives a heading: lower case, spaces to `-`, other
/// punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}
