//! `cargo run -p xtask -- componentize CORE.wasm OUT.wasm`: wrap the policy's
//! core module (built for wasm32-unknown-unknown) into a component with the
//! `wit-component` crate, reading the component-type section wit-bindgen put
//! in the module. No WASI adapter: the module imports nothing but our WIT.
//!
//! `cargo run -p xtask -- wit COMPONENT.wasm` prints the component's WIT
//! (its imports and exports), like `wasm-tools component wit`.
//!
//! `cargo build --message-format=json … | cargo run -p xtask -- executable
//! NAME` prints the path of the executable cargo built for target NAME
//! (`make component`: a target dir or triple set in a cargo config moves
//! it, so the path is cargo's word).
//!
//! `cargo run -q -p xtask -- docs` (`make reference`) writes the reference
//! pages under docs/src/reference/ from the code; `docs --check` only says
//! which are stale ([`xtask::reference`]).

use anyhow::{Context, Result, bail};
use std::path::Path;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["componentize", core, out] => componentize(Path::new(core), Path::new(out)),
        ["wit", component] => print_wit(Path::new(component)),
        ["executable", name] => print_executable(name),
        ["docs"] => xtask::reference::write(&workspace_root()),
        ["docs", "--check"] => match xtask::reference::check(&workspace_root()) {
            Ok(()) => Ok(()),
            Err(stale) => {
                eprintln!("xtask: {stale}");
                std::process::exit(1);
            }
        },
        _ => bail!(
            "usage: xtask componentize CORE.wasm OUT.wasm | xtask wit COMPONENT.wasm | \
             xtask executable NAME < CARGO-JSON | xtask docs [--check]"
        ),
    }
}

/// The workspace root: xtask's own folder's parent.
fn workspace_root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

fn componentize(core: &Path, out: &Path) -> Result<()> {
    let module = std::fs::read(core).with_context(|| format!("reading {}", core.display()))?;
    let component = wit_component::ComponentEncoder::default()
        .validate(true)
        .module(&module)
        .with_context(|| format!("{} is not a wit-bindgen module", core.display()))?
        .encode()
        .context("encoding the component")?;
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // Write beside the target, then rename: a gateway watching `out` never
    // sees half a file.
    let tmp = out.with_extension("wasm.tmp");
    std::fs::write(&tmp, &component).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, out).with_context(|| format!("renaming to {}", out.display()))?;
    eprintln!(
        "componentized {} -> {} ({} bytes)",
        core.display(),
        out.display(),
        component.len()
    );
    Ok(())
}

fn print_wit(component: &Path) -> Result<()> {
    let bytes =
        std::fs::read(component).with_context(|| format!("reading {}", component.display()))?;
    let decoded = wit_component::decode(&bytes).context("decoding the component")?;
    let mut printer = wit_component::WitPrinter::default();
    printer.print(decoded.resolve(), decoded.package(), &[])?;
    println!("{}", printer.output);
    Ok(())
}

fn print_executable(name: &str) -> Result<()> {
    let mut found = None;
    for line in std::io::stdin().lines() {
        let message: serde_json::Value = serde_json::from_str(&line?)?;
        if message["reason"] == "compiler-artifact"
            && message["target"]["name"] == name
            && let Some(path) = message["executable"].as_str()
        {
            found = Some(path.to_owned());
        }
    }
    let path = found.with_context(|| format!("cargo reported no executable named {name}"))?;
    println!("{path}");
    Ok(())
}
