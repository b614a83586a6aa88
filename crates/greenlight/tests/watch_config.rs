//! `greenlight watch` configured by a file and the environment (docs/configuration.md), and its
//! re-exec when the config file or the binary on disk changes (docs/configuration.md#re-exec),
//! run as an operator runs it: the binary, real git, the sandbox standing in for Argo CD. Waits
//! are on printed lines and recorded states, each bounded.

#[macro_use]
mod common;
use common::*;
use greenlight_testkit as kit;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(60);

/// An Argo CD nobody answers at: the tests that only start the daemon need none.
const NO_ARGOCD: &str = "http://127.0.0.1:1";

/// Waits until `proc` has printed `n` lines containing `needle`.
#[track_caller]
fn wait_count(proc: &Proc, needle: &str, n: usize, within: Duration) {
    let end = Instant::now() + within;
    loop {
        let seen = proc.lines().iter().filter(|l| l.contains(needle)).count();
        if seen >= n {
            return;
        }
        assert!(
            Instant::now() < end,
            "{seen} of {n} lines containing {needle:?} within {within:?}; output:\n{}",
            proc.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A config file mounted as Kubernetes mounts a ConfigMap: `<dir>/watch.toml ->
/// ..data/watch.toml`, `..data -> ..<version>`; a new version is a new directory, and `..data`
/// swapped by a rename.
struct ConfigMap {
    dir: PathBuf,
    versions: usize,
}

impl ConfigMap {
    fn new(dir: &Path, text: &str) -> ConfigMap {
        let mut c = ConfigMap {
            dir: dir.to_owned(),
            versions: 0,
        };
        c.update(text);
        symlink("..data/watch.toml", c.path()).unwrap();
        c
    }

    fn path(&self) -> PathBuf {
        self.dir.join("watch.toml")
    }

    fn update(&mut self, text: &str) {
        self.versions += 1;
        let version = format!("..v{}", self.versions);
        std::fs::create_dir_all(self.dir.join(&version)).unwrap();
        std::fs::write(self.dir.join(&version).join("watch.toml"), text).unwrap();
        let tmp = self.dir.join("..data_tmp");
        symlink(&version, &tmp).unwrap();
        std::fs::rename(&tmp, self.dir.join("..data")).unwrap();
    }
}

/// The `watching <repo> <branch> from <sha>` line of a daemon started with `args` and `envs`.
#[track_caller]
fn watching_line(args: &[&str], envs: &[(&str, &str)]) -> String {
    let wd = Proc::spawn(BIN, args, envs);
    let line = wd.wait_line(kit::watch::WATCHING, T);
    drop(wd);
    line
}

#[test]
fn flags_come_first_then_the_environment_then_the_file() {
    let repo = Repo::new();
    let c0 = repo.remote_tip();
    let c1 = repo.set_image("web", GOOD2, "web: 1.1.0");
    let c2 = repo.set_image("web", GOOD, "web: 1.0.0");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("watch.toml");
    std::fs::write(
        &file,
        format!(
            "# the watchdog of the deploy repository\nrepo = \"{}\"\nargocd-url = \"{NO_ARGOCD}\"\nstate = \"{}\"\nsince = \"{c0}\"\nfetch-interval = \"200ms\"\ndry-run = true\n",
            repo.repo(),
            dir.path().join("file.db").display()
        ),
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let s2 = dir.path().join("env.db");
    let s3 = dir.path().join("flag.db");

    // The file alone: every required flag and the first revision come from it.
    let line = watching_line(&["watch", "--config", file], &[]);
    assert!(line.ends_with(&format!("from {c0}")), "{line}");
    assert!(dir.path().join("file.db").exists());

    // GREENLIGHT_CONFIG names the file; the environment overrides it.
    let line = watching_line(
        &["watch"],
        &[
            ("GREENLIGHT_CONFIG", file),
            ("GREENLIGHT_STATE", s2.to_str().unwrap()),
            ("GREENLIGHT_SINCE", &c1),
        ],
    );
    assert!(line.ends_with(&format!("from {c1}")), "{line}");
    assert!(s2.exists(), "the state named by GREENLIGHT_STATE");

    // A flag overrides both.
    let line = watching_line(
        &[
            "watch",
            "--config",
            file,
            "--state",
            s3.to_str().unwrap(),
            "--since",
            &c2,
        ],
        &[("GREENLIGHT_SINCE", &c1)],
    );
    assert!(line.ends_with(&format!("from {c2}")), "{line}");
    assert!(s3.exists());
}

/// A refused layer: exit 2, the message names where the value was written and what the key
/// accepts, and nothing starts (no state, no clone).
#[track_caller]
fn refused(args: &[&str], envs: &[(&str, &str)], state: &Path) -> String {
    let out = Command::new(BIN)
        .args(args)
        .envs(envs.iter().copied())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "{args:?} {envs:?}: {err}");
    assert!(!state.exists(), "nothing started: {err}");
    assert!(!state.with_extension("db.d").exists(), "no clone: {err}");
    err
}

#[test]
fn unknown_keys_and_bad_values_are_refused_where_they_were_written() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("s.db");
    let file = dir.path().join("watch.toml");
    let f = file.to_str().unwrap();
    let base = format!(
        "repo = \"/nowhere\"\nargocd-url = \"{NO_ARGOCD}\"\nstate = \"{}\"\n",
        state.display()
    );

    std::fs::write(&file, format!("{base}stable_for = \"10m\"\n")).unwrap();
    let err = refused(&["watch", "--config", f], &[], &state);
    assert!(
        err.contains(&format!(
            "{f}:4:1: unknown key \"stable_for\": `greenlight watch` takes repo, "
        )) && err.contains(" stable-for,")
            && err.contains(" argocd-url"),
        "{err}"
    );
    assert!(err.contains("stable-for"), "the keys it takes: {err}");

    std::fs::write(&file, format!("{base}log-format = \"xml\"\n")).unwrap();
    let err = refused(&["watch", "--config", f], &[], &state);
    assert!(
        err.contains(&format!(
            "{f}:4:14: log-format = \"xml\": not one of text, json"
        )),
        "{err}"
    );

    std::fs::write(&file, format!("{base}\nstable-for = \"soon\"\n")).unwrap();
    let err = refused(&["watch", "--config", f], &[], &state);
    assert!(
        err.contains(&format!(
            "{f}:5:14: stable-for = \"soon\": invalid duration"
        )),
        "{err}"
    );

    // A safety switch in the file: anything but a documented spelling refuses to start.
    std::fs::write(&file, format!("{base}dry-run = \"maybe\"\n")).unwrap();
    let err = refused(&["watch", "--config", f], &[], &state);
    assert!(
        err.contains(&format!("{f}:4:11: dry-run: a switch takes true or false")),
        "{err}"
    );
    assert!(err.contains("1, true, yes or on"), "{err}");

    // A bad value in the environment names the variable, also under a flag that overrides it.
    std::fs::write(&file, &base).unwrap();
    let err = refused(
        &["watch", "--config", f, "--stable-for", "2m"],
        &[("GREENLIGHT_STABLE_FOR", "0s")],
        &state,
    );
    assert!(
        err.contains("GREENLIGHT_STABLE_FOR=\"0s\": must be greater than zero"),
        "{err}"
    );
    let err = refused(
        &["watch", "--config", f, "--dry-run"],
        &[("GREENLIGHT_DRY_RUN", "perhaps")],
        &state,
    );
    assert!(
        err.contains("GREENLIGHT_DRY_RUN=\"perhaps\"") && err.contains("1, true, yes or on"),
        "{err}"
    );
    let err = refused(
        &["watch"],
        &[("GREENLIGHT_CONFIG", "/no/such/watch.toml")],
        &state,
    );
    assert!(
        err.contains("GREENLIGHT_CONFIG /no/such/watch.toml: cannot read the config file"),
        "{err}"
    );
}

/// The config file changes under a daemon with a watch in flight: a change it would refuse is
/// said (file:line:column) and the daemon runs on; a good change re-executes it (same pid, one
/// line saying why), and the watch goes on from its recorded times to the verdict it would
/// have had.
fn a_config_change_re_executes_with_a_watch_in_flight() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.db");
    let text = format!(
        "repo = \"{}\"\nargocd-url = \"{}\"\nstate = \"{}\"\nstable-for = \"8s\"\nfetch-interval = \"200ms\"\nstale-after = \"2s\"\nunknown-app-grace = \"3s\"\ngit-author = \"greenlight-bot <bot@greenlight.test>\"\n",
        repo.repo(),
        sb.url,
        state.display()
    );
    let mut config = ConfigMap::new(dir.path(), &text);
    let path = config.path();
    let mut wd = Proc::spawn(
        BIN,
        [
            "watch",
            "--config",
            path.to_str().unwrap(),
            "--reexec-interval",
            "100ms",
        ],
        &[],
    );
    wd.wait_line(kit::watch::WATCHING, T);
    let pid = wd.child.id();
    let c = repo.set_image(
        "web",
        GOOD2,
        &format!("web: 1.1.0\n\n{}", trailer("web", "60", "arm")),
    );
    let before = wait_state(&state, &c, "JUDGING", T, &wd);
    let before = if before["healthy_since"].is_null() {
        // Healthy, not yet recorded so: wait for the streak to start.
        let end = Instant::now() + T;
        loop {
            let w = kit::watch::watch_of(&status_json(&state), &c)
                .cloned()
                .unwrap();
            if !w["healthy_since"].is_null() {
                break w;
            }
            assert!(Instant::now() < end, "no streak: {}", wd.output());
            std::thread::sleep(Duration::from_millis(50));
        }
    } else {
        before
    };
    assert_eq!(before["state"], "JUDGING", "{before}");

    // A change the command would refuse: said with its place, and the daemon runs on.
    config.update(&format!("{text}stable-for-real = \"1s\"\n"));
    let said = wd.wait_line("is refused", T);
    assert!(said.contains("error"), "{said}");
    assert!(
        said.contains(&format!(
            "{}:9:1: unknown key \"stable-for-real\"",
            path.display()
        )),
        "{said}"
    );
    assert!(wd.is_running());
    assert_eq!(
        wd.lines()
            .iter()
            .filter(|l| l.contains(kit::watch::WATCHING))
            .count(),
        1,
        "not re-executed into a refusal"
    );

    // A good change: one line, then the same process starts again.
    config.update(&format!("{text}reopen-horizon = \"12h\"\n"));
    let said = wd.wait_line("changed: finishing the current step", T);
    assert!(
        said.contains(&format!("the config file {} changed", path.display())),
        "{said}"
    );
    wait_count(&wd, kit::watch::WATCHING, 2, T);
    assert!(wd.is_running());
    assert_eq!(wd.child.id(), pid, "re-executed in place");
    let mid = kit::watch::watch_of(&status_json(&state), &c)
        .cloned()
        .unwrap();
    assert_eq!(
        mid["state"], "JUDGING",
        "still in flight after the re-exec: {mid}"
    );
    // What `ps` shows is the command line as typed, also after the re-exec: the file's values
    // never become arguments.
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let shown: Vec<String> = String::from_utf8(cmdline)
        .unwrap()
        .split_terminator('\0')
        .map(String::from)
        .collect();
    assert_eq!(
        shown[1..],
        [
            "watch",
            "--config",
            path.to_str().unwrap(),
            "--reexec-interval",
            "100ms"
        ]
    );

    let after = wait_state(&state, &c, "CONFIRMED", T, &wd);
    for field in ["id", "watch_started_at", "reached_at", "healthy_since"] {
        assert_eq!(
            after[field],
            before[field],
            "{field} kept across the re-exec:\n{}",
            wd.output()
        );
    }
    let st = status_json(&state);
    assert_eq!(
        st["watches"].as_array().unwrap().len(),
        1,
        "no watch lost or doubled: {st}"
    );
    assert_eq!(repo.remote_tip(), c, "nothing pushed");
}

on_every_argocd_version!(a_config_change_re_executes_with_a_watch_in_flight);

/// A copy of the binary with `tag` appended: a different file that runs the same.
fn tagged_copy(to: &Path, tag: &str) {
    let tmp = to.with_extension("tmp");
    std::fs::copy(BIN, &tmp).unwrap();
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&tmp)
        .unwrap()
        .write_all(tag.as_bytes())
        .unwrap();
    std::fs::rename(&tmp, to).unwrap();
}

/// An upgrade renames a new binary over the running one: the daemon re-executes it in place. A
/// replacement that is not executable is warned about and the daemon runs on.
#[test]
fn a_binary_replaced_by_rename_is_re_executed() {
    let repo = Repo::new();
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("greenlight");
    tagged_copy(&bin, "");
    let state = dir.path().join("state.db");
    let mut wd = Proc::spawn(
        &bin,
        kit::watch::watch_args(
            &repo.repo(),
            NO_ARGOCD,
            &state,
            &["--reexec-interval", "100ms"],
        ),
        &[],
    );
    wd.wait_line(kit::watch::WATCHING, T);
    let pid = wd.child.id();

    // Not executable: warned, running on.
    tagged_copy(&bin, "\nv2");
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o644)).unwrap();
    wd.wait_line("is not an executable file: running on", T);
    assert!(wd.is_running());

    // Made executable: it runs, so the daemon re-executes it.
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let said = wd.wait_line("changed: finishing the current step", T);
    assert!(
        said.contains(&format!("the binary {} changed", bin.display())),
        "{said}"
    );
    wait_count(&wd, kit::watch::WATCHING, 2, T);
    assert!(wd.is_running());
    assert_eq!(wd.child.id(), pid, "re-executed in place");
    // The new process watches the new binary: the next replacement is seen too.
    tagged_copy(&bin, "\nv3");
    wait_count(&wd, "changed: finishing the current step", 2, T);
    wait_count(&wd, kit::watch::WATCHING, 3, T);
    // SIGTERM still stops it cleanly.
    wd.sigterm();
    assert!(wd.wait_exit(T).success(), "{}", wd.output());
}

/// The config file of a daemon over `repo` and the sandbox at `url`, recording in `state`,
/// with the kit's test timings.
fn config_text(repo: &Repo, url: &str, state: &Path) -> String {
    format!(
        "repo = \"{}\"\nargocd-url = \"{url}\"\nstate = \"{}\"\nstable-for = \"2s\"\nfetch-interval = \"200ms\"\nstale-after = \"500ms\"\nunknown-app-grace = \"3s\"\ngit-author = \"greenlight-bot <bot@greenlight.test>\"\n",
        repo.repo(),
        state.display()
    )
}

/// An armed failure whose deadline falls after a re-exec: the deadline runs from the recorded
/// reach, and the commit is reverted once, by the new process.
#[test]
fn an_armed_failure_across_a_re_exec_is_reverted_once() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.db");
    let text = config_text(&repo, &sb.url, &state);
    let mut config = ConfigMap::new(dir.path(), &text);
    let path = config.path();
    let wd = Proc::spawn(
        BIN,
        [
            "watch",
            "--config",
            path.to_str().unwrap(),
            "--reexec-interval",
            "100ms",
        ],
        &[],
    );
    wd.wait_line(kit::watch::WATCHING, T);
    let pid = wd.child.id();
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: 2.0.0\n\n{}", trailer("web", "8", "arm")),
    );
    let before = wait_state(&state, &bad, "JUDGING", T, &wd);
    assert!(before["reached_at"].is_string(), "{before}");

    config.update(&format!("{text}reopen-horizon = \"12h\"\n"));
    wd.wait_line("changed: finishing the current step", T);
    wait_count(&wd, kit::watch::WATCHING, 2, T);
    assert_eq!(wd.child.id(), pid, "re-executed in place");
    let mid = kit::watch::watch_of(&status_json(&state), &bad)
        .cloned()
        .unwrap();
    assert_eq!(mid["state"], "JUDGING", "the deadline still ahead: {mid}");

    let after = wait_state(&state, &bad, "REVERTED", T, &wd);
    for field in ["id", "watch_started_at", "reached_at"] {
        assert_eq!(
            after[field], before[field],
            "{field} kept across the re-exec"
        );
    }
    assert_eq!(count_reverts_of(&repo, &bad), 1, "reverted once");
    assert_eq!(repo.remote_tip(), after["revert_commit"].as_str().unwrap());
    let st = status_json(&state);
    assert_eq!(st["watches"].as_array().unwrap().len(), 1, "{st}");
}

/// `dry-run = true` in the file holds against `GREENLIGHT_DRY_RUN=0`: no layer turns a safety
/// switch off that another turned on.
#[test]
fn dry_run_in_the_file_is_not_turned_off_by_the_environment() {
    let repo = Repo::new();
    let sb = sandbox(&repo, &["web=apps/web"], &[]);
    settled(&sb, &repo, &["web"]);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.db");
    let file = dir.path().join("watch.toml");
    std::fs::write(
        &file,
        format!("{}dry-run = true\n", config_text(&repo, &sb.url, &state)),
    )
    .unwrap();
    let wd = Proc::spawn(
        BIN,
        ["watch", "--config", file.to_str().unwrap()],
        &[("GREENLIGHT_DRY_RUN", "0")],
    );
    wd.wait_line(kit::watch::WATCHING, T);
    let bad = repo.set_image(
        "web",
        BAD,
        &format!("web: 2.0.0\n\n{}", trailer("web", "3", "arm")),
    );
    let w = wait_state(&state, &bad, "FAIL", T, &wd);
    assert_eq!(w["dry_run"], true, "{w}");
    assert_eq!(repo.remote_tip(), bad, "nothing pushed");
}
