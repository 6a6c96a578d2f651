//! The reference pages under docs/src/reference/ (CLI and man page,
//! config and its JSON Schema, JSON answers, Python API) are made from the
//! code by `make reference`; these fail while a committed page differs from
//! what the code makes now.

use session_switch_tests::workspace_root;
use xtask::reference;

#[test]
fn the_reference_pages_are_what_the_code_makes() {
    if let Err(stale) = reference::check(&workspace_root()) {
        panic!("{stale}");
    }
}

#[test]
fn the_check_names_a_stale_page_and_a_missing_one() {
    let pages = reference::pages(&workspace_root()).unwrap();
    let copy = tempfile::tempdir_in(workspace_root().join("target")).unwrap();
    for page in &pages {
        let path = copy.path().join(&page.path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &page.text).unwrap();
    }
    assert_eq!(reference::check_against(copy.path(), &pages), Ok(()));

    let dir = copy.path().join(reference::DIR);
    let config = dir.join("config.md");
    let edited = std::fs::read_to_string(&config).unwrap() + "\nan edit by hand\n";
    std::fs::write(&config, edited).unwrap();
    std::fs::remove_file(dir.join("json.md")).unwrap();
    let stale = reference::check_against(copy.path(), &pages).unwrap_err();
    assert!(
        stale.contains("docs/src/reference/config.md, docs/src/reference/json.md"),
        "{stale}"
    );
    assert!(stale.contains("run `make reference`"), "{stale}");
}
