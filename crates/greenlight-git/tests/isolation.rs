//! greenlight's git is isolated from the environment it runs in: a user's global config,
//! `GIT_*` variables left by a surrounding hook. One test in its own process, because it
//! changes the process environment.

mod common;

use common::Fixture;

#[test]
fn user_config_and_git_environment_do_not_reach_greenlights_git() {
    let fx = Fixture::build("history.sh");
    let home = fx.path("home");
    std::fs::create_dir_all(&home).unwrap();
    // A global config that would send every fetch of the remote to another repository,
    // and a credential helper that would run a command.
    let hostile = format!(
        "[url \"{other}\"]\n\tinsteadOf = {remote}\n[credential]\n\thelper = \"!touch {home}/helper-ran\"\n",
        other = fx.path("other.git").display(),
        remote = fx.remote(),
        home = home.display(),
    );
    std::fs::write(home.join(".gitconfig"), &hostile).unwrap();
    std::fs::write(home.join("global.gitconfig"), &hostile).unwrap();
    // SAFETY: this test binary runs this one test; no other thread reads the environment.
    unsafe {
        std::env::set_var("HOME", &home);
        std::env::set_var("GIT_CONFIG_GLOBAL", home.join("global.gitconfig"));
        // As inside a git hook: would point every git command at another repository.
        std::env::set_var("GIT_DIR", fx.path("other.git"));
    }
    let repo = fx.open();
    assert_eq!(repo.fetch("main").unwrap(), fx.sha("R"));
    assert_eq!(repo.remote_default_branch().unwrap(), "main");
    assert_eq!(repo.commit(&fx.sha("B")).unwrap().subject, "Bump web to 2");
    assert!(!home.join("helper-ran").exists());
}
