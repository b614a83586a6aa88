//! End-to-end tests of `greenlight guard image`, run as CI would run the binary. `--resolve` is
//! tested against a small OCI registry stand-in served over plain HTTP on 127.0.0.1: manifests
//! with real sha256 digests, Accept negotiation for an image index, a registry without HEAD or
//! digest headers, a registry whose digest header lies, the anonymous bearer-token dance, and a
//! repository that needs the token from `--token-file`.

use axum::Router;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const DOCKER_V2: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// What `--token-file` holds for the `secret/app` repository; must never be echoed.
const SECRET: &str = "glt_5b1f0e7a9c3d4e8f_registry_token";
const HEX64: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn greenlight(cwd: &Path, args: &[&str]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_greenlight"));
    // A proxy from the environment would intercept requests meant for the 127.0.0.1 stand-in.
    for var in [
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
    ] {
        command.env_remove(var);
    }
    let out = command
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run greenlight");
    Run {
        code: out.status.code().expect("exited normally, not by a signal"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// `guard image` with the given extra arguments, in an empty directory (no config file).
fn guard(args: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let mut all = vec!["guard", "image"];
    all.extend_from_slice(args);
    greenlight(dir.path(), &all)
}

fn sha256(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    format!(
        "sha256:{}",
        hash.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

// ---------------------------------------------------------------- the guard without a registry

#[test]
fn every_mutable_tag_and_a_missing_tag_is_rejected_by_name_with_the_fix() {
    for image in [
        "ghcr.io/acme/web:latest",
        "ghcr.io/acme/web:main",
        "ghcr.io/acme/web:master",
        "ghcr.io/acme/web:stable",
        "ghcr.io/acme/web:edge",
        "ghcr.io/acme/web",
        "nginx",
    ] {
        let run = guard(&[image]);
        assert_eq!(run.code, 1, "{image}: {}", run.stderr);
        assert!(
            run.stderr.contains(&format!("`{image}`")),
            "{image} not named: {}",
            run.stderr
        );
        assert!(run.stderr.contains(":sha-<short-sha>`"), "{}", run.stderr);
        assert!(run.stderr.contains("@sha256:<digest>`"), "{}", run.stderr);
        assert_eq!(run.stdout, "", "stdout is only for pinned references");
    }
}

/// kube-score and Polaris read `registry:5000/app` as the tag `5000/app` and let it through.
#[test]
fn registry_port_is_not_mistaken_for_a_tag() {
    let run = guard(&["registry:5000/app"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("`registry:5000/app` has no tag"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("`registry:5000/app:sha-<short-sha>`"),
        "{}",
        run.stderr
    );

    let ok = guard(&[
        "registry:5000/app:1.4.2",
        "localhost:5000/team/app:sha-1a2b3c4",
    ]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
}

#[test]
fn several_references_each_offender_is_named_once() {
    let run = guard(&["app:v1", "app:latest", "other:edge", "third:sha-9f8e7d6"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("`app:latest` uses the mutable tag `latest`")
    );
    assert!(
        run.stderr
            .contains("`other:edge` uses the mutable tag `edge`")
    );
    assert!(
        run.stderr.contains("2 of 4 image reference(s) rejected"),
        "{}",
        run.stderr
    );
    assert_eq!(run.stderr.matches("error: ").count(), 2, "{}", run.stderr);
}

#[test]
fn digests_and_other_tags_pass() {
    let pinned = format!("registry:5000/app@sha256:{HEX64}");
    let run = guard(&[
        "app:1.4.2",
        "ghcr.io/acme/web:sha-1a2b3c4",
        &pinned,
        "app:latest-1.4",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr
            .contains(&format!("`{pinned}` is pinned by digest"))
    );
}

#[test]
fn a_digest_wins_over_a_mutable_tag() {
    let run = guard(&[&format!("ghcr.io/acme/web:latest@sha256:{HEX64}")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn unparsable_references_exit_2_naming_each() {
    let run = guard(&["Nginx", "app:v1", "app:"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("invalid image reference `Nginx`: repository `Nginx` must be lowercase"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("invalid image reference `app:`: the tag after `:` is empty"),
        "{}",
        run.stderr
    );

    let bad_digest = guard(&["app@sha256:abc"]);
    assert_eq!(bad_digest.code, 2);
    assert!(
        bad_digest.stderr.contains("`app@sha256:abc`"),
        "{}",
        bad_digest.stderr
    );

    let empty = guard(&[""]);
    assert_eq!(empty.code, 2);
    assert!(
        empty.stderr.contains("the reference is empty"),
        "{}",
        empty.stderr
    );

    let spaced = guard(&["nginx:1.27 "]);
    assert_eq!(spaced.code, 2);
    assert!(spaced.stderr.contains("whitespace"), "{}", spaced.stderr);
}

#[test]
fn unparsable_wins_over_mutable() {
    let run = guard(&["app:latest", "Bad/Repo/Name"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}

#[test]
fn mutable_flag_adds_tags_and_prefixes() {
    // Tags with a version in them: the list decides (a tag naming no version, `dev`, is mutable
    // by default).
    assert_eq!(guard(&["app:dev"]).code, 1, "dev names no version");
    assert_eq!(
        guard(&["app:dev-1"]).code,
        0,
        "dev-1 is not mutable by default"
    );
    let run = guard(&["--mutable", "dev-1,nightly*", "app:dev-1"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("mutable tag `dev-1`"));
    assert_eq!(
        guard(&["--mutable", "dev-1,nightly*", "app:nightly-2026-12-02"]).code,
        1
    );
    assert_eq!(
        guard(&["--mutable", "dev-1", "--mutable", "qa-1", "app:qa-1"]).code,
        1
    );
    assert_eq!(
        guard(&["--mutable", "dev-1,nightly*", "app:dev-10"]).code,
        0
    );
}

#[test]
fn config_file_adds_tags() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(".greenlight.toml"),
        "# other tools' sections are ignored\n[lint]\nfail-on = \"error\"\n\n[guard]\nmutable-tags = [\"dev-1\", \"preview*\"]\n",
    )
    .unwrap();
    let run = greenlight(dir.path(), &["guard", "image", "app:dev-1"]);
    assert_eq!(
        run.code, 1,
        "default .greenlight.toml is read: {}",
        run.stderr
    );
    let run = greenlight(dir.path(), &["guard", "image", "app:preview-42"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let run = greenlight(dir.path(), &["guard", "image", "app:v1", "app:latest"]);
    assert_eq!(run.code, 1, "the defaults still apply");
    assert!(run.stderr.contains("`app:latest`"));

    // The lint's list is the shared one, so lint and guard agree on what is mutable.
    std::fs::write(
        dir.path().join("shared.toml"),
        "[lint]\nmutable-tags = [\"release-1\"]\n",
    )
    .unwrap();
    let run = greenlight(
        dir.path(),
        &["guard", "image", "--config", "shared.toml", "app:release-1"],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);

    std::fs::write(
        dir.path().join("ci.toml"),
        "[guard]\nmutable-tags = [\"qa-1\"]\n",
    )
    .unwrap();
    let run = greenlight(
        dir.path(),
        &[
            "guard",
            "image",
            "--config",
            "ci.toml",
            "app:qa-1",
            "app:dev-1",
        ],
    );
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("`app:qa-1` uses the mutable tag `qa-1`")
    );
    assert!(
        run.stderr.contains("ok: `app:dev-1`"),
        "--config replaces the default file: {}",
        run.stderr
    );
}

/// `[lint] immutable-tags` is the team's word for lint and guard alike: a word that names no
/// version passes once declared; `latest` never does.
#[test]
fn declared_immutable_tags_pass_the_guard_as_they_pass_lint() {
    let dir = tempfile::tempdir().unwrap();
    let run = greenlight(
        dir.path(),
        &["guard", "image", "argoproj/rollouts-demo:blue"],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    std::fs::write(
        dir.path().join(".greenlight.toml"),
        "[lint]\nimmutable-tags = [\"blue\", \"latest\"]\n",
    )
    .unwrap();
    let run = greenlight(
        dir.path(),
        &["guard", "image", "argoproj/rollouts-demo:blue"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = greenlight(dir.path(), &["guard", "image", "app:latest"]);
    assert_eq!(run.code, 1, "the mutable list wins: {}", run.stderr);
}

#[test]
fn bad_config_files_exit_2_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let run = greenlight(
        dir.path(),
        &["guard", "image", "--config", "absent.toml", "app:v1"],
    );
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("absent.toml"), "{}", run.stderr);

    std::fs::write(dir.path().join("broken.toml"), "[guard\nmutable-tags = 3\n").unwrap();
    let run = greenlight(
        dir.path(),
        &["guard", "image", "--config", "broken.toml", "app:v1"],
    );
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("config file broken.toml"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("broken.toml:1:"),
        "the TOML error says where: {}",
        run.stderr
    );

    std::fs::write(
        dir.path().join(".greenlight.toml"),
        "[lint]\nfail-on = \"error\"\n\n[guard]\nmutable-tags = [\"dev\", 3]\n",
    )
    .unwrap();
    let run = greenlight(dir.path(), &["guard", "image", "app:v1"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("config file .greenlight.toml"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains(".greenlight.toml:5:"), "{}", run.stderr);
    assert!(run.stderr.contains("expected a string"), "{}", run.stderr);
}

/// One reader serves both commands: a file the lint refuses, the guard refuses in the same words.
#[test]
fn guard_and_lint_refuse_a_bad_config_file_alike() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(".greenlight.toml"),
        "[guard]\nmutable-tags = [\"dev\"]\n[lint]\nselect = [\"GL999\"]\n",
    )
    .unwrap();
    let guard = greenlight(dir.path(), &["guard", "image", "app:v1"]);
    let lint = greenlight(dir.path(), &["lint", "."]);
    assert_eq!(
        (guard.code, lint.code),
        (2, 2),
        "{}{}",
        guard.stderr,
        lint.stderr
    );
    let expected = "config file .greenlight.toml:4:11: unknown rule `GL999`";
    assert!(guard.stderr.contains(expected), "{}", guard.stderr);
    assert!(lint.stderr.contains(expected), "{}", lint.stderr);
}

#[test]
fn timeout_takes_the_shared_duration_grammar() {
    let run = guard(&["--timeout", "soon", "app:v1"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("--timeout: invalid duration"),
        "{}",
        run.stderr
    );
    assert_eq!(guard(&["--timeout", "0s", "app:v1"]).code, 2);
    for ok in ["30", "1m30s", "1.5s", "2 min"] {
        assert_eq!(guard(&["--timeout", ok, "app:v1"]).code, 0, "{ok}");
    }
}

#[test]
fn registry_options_require_resolve() {
    assert_eq!(guard(&["--plain-http", "app:v1"]).code, 2);
    assert_eq!(guard(&["--token-file", "t", "app:v1"]).code, 2);
    assert_eq!(guard(&[]).code, 2, "at least one image is required");
}

// ---------------------------------------------------------------- the registry stand-in

#[derive(Clone)]
struct Manifest {
    media_type: &'static str,
    body: Vec<u8>,
}

#[derive(Clone, Copy, PartialEq)]
enum Access {
    Open,
    /// 401 with a Bearer challenge; the token service hands out an anonymous pull token.
    Anonymous,
    /// Only `Bearer SECRET` is accepted; the token service refuses anonymous tokens.
    Secret,
}

#[derive(Clone, Copy, PartialEq)]
enum Quirk {
    None,
    /// An old registry: HEAD is 405 and no `Docker-Content-Digest` is ever sent.
    NoHeadNoDigest,
    /// HEAD has no digest header; GET sends one that does not match the body.
    WrongDigestHeader,
}

struct Repo {
    tags: HashMap<&'static str, Manifest>,
    access: Access,
    quirk: Quirk,
}

#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    authorization: Option<String>,
}

struct Stand {
    addr: SocketAddr,
    repos: HashMap<&'static str, Repo>,
    seen: Mutex<Vec<Seen>>,
}

/// A registry stand-in bound before its server task starts, so the port accepts at once.
struct Registry {
    stand: Arc<Stand>,
    _runtime: tokio::runtime::Runtime,
}

impl Registry {
    fn start() -> Registry {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let stand = Arc::new(Stand {
            addr,
            repos: repos(),
            seen: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/v2/{*rest}", any(manifest))
            .route("/token", get(token))
            .with_state(stand.clone());
        runtime.spawn(async move { axum::serve(listener, app).await });
        Registry {
            stand,
            _runtime: runtime,
        }
    }

    fn image(&self, rest: &str) -> String {
        format!("{}/{rest}", self.stand.addr)
    }

    fn body(&self, repo: &str, tag: &str) -> Vec<u8> {
        self.stand.repos[repo].tags[tag].body.clone()
    }

    fn seen(&self) -> Vec<Seen> {
        self.stand.seen.lock().unwrap().clone()
    }
}

fn json(value: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec_pretty(&value).unwrap()
}

/// Image manifests that point at real (if tiny) config and layer blobs by their digests.
fn image_manifest(media_type: &'static str, seed: &str) -> Manifest {
    let config = format!("{{\"architecture\":\"amd64\",\"os\":\"linux\",\"seed\":\"{seed}\"}}");
    let layer = format!("layer of {seed}");
    let (config_type, layer_type) = if media_type == DOCKER_V2 {
        (
            "application/vnd.docker.container.image.v1+json",
            "application/vnd.docker.image.rootfs.diff.tar.gzip",
        )
    } else {
        (
            "application/vnd.oci.image.config.v1+json",
            "application/vnd.oci.image.layer.v1.tar+gzip",
        )
    };
    Manifest {
        media_type,
        body: json(serde_json::json!({
            "schemaVersion": 2,
            "mediaType": media_type,
            "config": {"mediaType": config_type, "digest": sha256(config.as_bytes()), "size": config.len()},
            "layers": [{"mediaType": layer_type, "digest": sha256(layer.as_bytes()), "size": layer.len()}],
        })),
    }
}

fn image_index(children: &[&Manifest]) -> Manifest {
    let platforms = [("amd64", "linux"), ("arm64", "linux")];
    let manifests: Vec<_> = children
        .iter()
        .zip(platforms)
        .map(|(m, (arch, os))| {
            serde_json::json!({
                "mediaType": m.media_type,
                "digest": sha256(&m.body),
                "size": m.body.len(),
                "platform": {"architecture": arch, "os": os},
            })
        })
        .collect();
    Manifest {
        media_type: OCI_INDEX,
        body: json(serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": manifests,
        })),
    }
}

fn repos() -> HashMap<&'static str, Repo> {
    let amd = image_manifest(OCI_MANIFEST, "web-amd64");
    let arm = image_manifest(OCI_MANIFEST, "web-arm64");
    let repo = |tags: Vec<(&'static str, Manifest)>, access, quirk| Repo {
        tags: tags.into_iter().collect(),
        access,
        quirk,
    };
    HashMap::from([
        (
            "team/web",
            repo(
                vec![
                    ("v1", image_manifest(OCI_MANIFEST, "web-v1")),
                    ("latest", image_index(&[&amd, &arm])),
                ],
                Access::Open,
                Quirk::None,
            ),
        ),
        (
            "legacy/app",
            repo(
                vec![("2.0", image_manifest(DOCKER_V2, "legacy-2.0"))],
                Access::Open,
                Quirk::NoHeadNoDigest,
            ),
        ),
        (
            "liar/app",
            repo(
                vec![("v1", image_manifest(OCI_MANIFEST, "liar"))],
                Access::Open,
                Quirk::WrongDigestHeader,
            ),
        ),
        (
            "public/app",
            repo(
                vec![("v3", image_manifest(OCI_MANIFEST, "public-v3"))],
                Access::Anonymous,
                Quirk::None,
            ),
        ),
        (
            // Its token service answers without end.
            "endless/app",
            repo(
                vec![("v1", image_manifest(OCI_MANIFEST, "endless-v1"))],
                Access::Anonymous,
                Quirk::None,
            ),
        ),
        (
            "secret/app",
            repo(
                vec![("v9", image_manifest(DOCKER_V2, "secret-v9"))],
                Access::Secret,
                Quirk::None,
            ),
        ),
    ])
}

fn registry_error(status: StatusCode, code: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        format!("{{\"errors\":[{{\"code\":\"{code}\",\"message\":\"{code}\"}}]}}"),
    )
        .into_response()
}

async fn manifest(
    State(stand): State<Arc<Stand>>,
    method: Method,
    UrlPath(rest): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap().to_string());
    stand.seen.lock().unwrap().push(Seen {
        method: method.to_string(),
        path: format!("/v2/{rest}"),
        authorization: authorization.clone(),
    });
    let Some((name, reference)) = rest.rsplit_once("/manifests/") else {
        return registry_error(StatusCode::NOT_FOUND, "NAME_UNKNOWN");
    };
    let Some(repo) = stand.repos.get(name) else {
        return registry_error(StatusCode::NOT_FOUND, "NAME_UNKNOWN");
    };

    let expected = match repo.access {
        Access::Open => None,
        Access::Anonymous => Some(format!("Bearer anon-{name}")),
        Access::Secret => Some(format!("Bearer {SECRET}")),
    };
    if let Some(expected) = expected
        && authorization.as_deref() != Some(expected.as_str())
    {
        let challenge = format!(
            "Bearer realm=\"http://{}/token\",service=\"stand-in\",scope=\"repository:{name}:pull\"",
            stand.addr
        );
        let mut response = registry_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED");
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_str(&challenge).unwrap(),
        );
        return response;
    }

    if method == Method::HEAD && repo.quirk == Quirk::NoHeadNoDigest {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let Some(manifest) = repo.tags.get(reference) else {
        return registry_error(StatusCode::NOT_FOUND, "MANIFEST_UNKNOWN");
    };
    // Like a registry that cannot convert: an index is served only to clients that accept one.
    let accept = headers
        .get_all(header::ACCEPT)
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect::<Vec<_>>()
        .join(",");
    if !accept.split(',').any(|t| t.trim() == manifest.media_type) {
        return registry_error(StatusCode::NOT_FOUND, "MANIFEST_UNKNOWN");
    }

    let mut response = if method == Method::HEAD {
        StatusCode::OK.into_response()
    } else {
        manifest.body.clone().into_response()
    };
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(manifest.media_type),
    );
    let digest = match (repo.quirk, method == Method::HEAD) {
        (Quirk::None, _) => Some(sha256(&manifest.body)),
        (Quirk::WrongDigestHeader, false) => Some(format!("sha256:{HEX64}")),
        _ => None,
    };
    if let Some(digest) = digest {
        h.insert(
            "docker-content-digest",
            HeaderValue::from_str(&digest).unwrap(),
        );
    }
    response
}

async fn token(
    State(stand): State<Arc<Stand>>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    stand.seen.lock().unwrap().push(Seen {
        method: "GET".into(),
        path: format!(
            "/token?service={}&scope={}",
            query.get("service").map_or("", String::as_str),
            query.get("scope").map_or("", String::as_str)
        ),
        authorization: headers
            .get(header::AUTHORIZATION)
            .map(|v| v.to_str().unwrap().to_string()),
    });
    let scope = query.get("scope").cloned().unwrap_or_default();
    let anonymous = stand.repos.iter().find(|(name, repo)| {
        repo.access == Access::Anonymous && scope == format!("repository:{name}:pull")
    });
    match (query.get("service").map(String::as_str), anonymous) {
        (Some("stand-in"), Some((name, _))) if *name == "endless/app" => {
            use futures_util::StreamExt;
            let chunk = axum::body::Bytes::from(vec![b' '; 64 * 1024]);
            let body = futures_util::stream::repeat(chunk).map(Ok::<_, std::io::Error>);
            (
                [(header::CONTENT_TYPE, "application/json")],
                axum::body::Body::from_stream(body),
            )
                .into_response()
        }
        (Some("stand-in"), Some((name, _))) => (
            [(header::CONTENT_TYPE, "application/json")],
            format!("{{\"token\":\"anon-{name}\",\"expires_in\":300}}"),
        )
            .into_response(),
        _ => registry_error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED"),
    }
}

// ---------------------------------------------------------------- --resolve

fn resolve(registry_args: &[&str]) -> Run {
    let mut args = vec!["--resolve", "--plain-http"];
    args.extend_from_slice(registry_args);
    guard(&args)
}

#[test]
fn resolve_prints_the_reference_pinned_to_the_served_digest_using_head_only() {
    let registry = Registry::start();
    let image = registry.image("team/web:v1");
    let run = resolve(&[&image]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let digest = sha256(&registry.body("team/web", "v1"));
    assert_eq!(run.stdout, format!("{image}@{digest}\n"));
    let seen = registry.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].method, "HEAD");
    assert_eq!(seen[0].path, "/v2/team/web/manifests/v1");
    assert_eq!(seen[0].authorization, None, "anonymous by default");
}

#[test]
fn resolve_pins_a_mutable_tag_to_its_index_digest() {
    let registry = Registry::start();
    let image = registry.image("team/web:latest");
    let run = resolve(&[&image]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The stand-in serves the index only to a client whose Accept lists the OCI index type.
    let digest = sha256(&registry.body("team/web", "latest"));
    assert_eq!(run.stdout, format!("{image}@{digest}\n"));
    assert!(
        run.stderr.contains("mutable tag `latest`") && run.stderr.contains("pinned reference"),
        "{}",
        run.stderr
    );

    // The untagged name means `latest`.
    let bare = registry.image("team/web");
    let run = resolve(&[&bare]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, format!("{bare}@{digest}\n"));
}

#[test]
fn resolve_falls_back_to_get_and_hashes_the_manifest() {
    let registry = Registry::start();
    let image = registry.image("legacy/app:2.0");
    let run = resolve(&[&image]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let digest = sha256(&registry.body("legacy/app", "2.0"));
    assert_eq!(run.stdout, format!("{image}@{digest}\n"));
    let methods: Vec<_> = registry.seen().into_iter().map(|s| s.method).collect();
    assert_eq!(methods, ["HEAD", "GET"]);
}

#[test]
fn resolve_refuses_a_digest_header_that_does_not_match_the_manifest() {
    let registry = Registry::start();
    let run = resolve(&[&registry.image("liar/app:v1")]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.stdout, "");
    let actual = sha256(&registry.body("liar/app", "v1"));
    assert!(
        run.stderr.contains(&format!("sha256:{HEX64}")) && run.stderr.contains(&actual),
        "{}",
        run.stderr
    );
}

#[test]
fn resolve_unknown_tag_exits_1_naming_it_and_still_prints_the_others() {
    let registry = Registry::start();
    let good = registry.image("team/web:v1");
    let missing = registry.image("team/web:v404");
    let run = resolve(&[&good, &missing]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        format!("{good}@{}\n", sha256(&registry.body("team/web", "v1")))
    );
    assert!(
        run.stderr.contains(&format!(
            "cannot resolve `{missing}`: the registry has no manifest"
        )),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("HTTP 404"), "{}", run.stderr);

    let unknown_repo = resolve(&[&registry.image("nobody/here:v1")]);
    assert_eq!(unknown_repo.code, 1, "{}", unknown_repo.stderr);
}

#[test]
fn resolve_does_the_anonymous_token_dance() {
    let registry = Registry::start();
    let image = registry.image("public/app:v3");
    let run = resolve(&[&image]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        format!("{image}@{}\n", sha256(&registry.body("public/app", "v3")))
    );
    let seen = registry.seen();
    let summary: Vec<_> = seen
        .iter()
        .map(|s| {
            (
                s.method.as_str(),
                s.path.as_str(),
                s.authorization.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("HEAD", "/v2/public/app/manifests/v3", None),
            (
                "GET",
                "/token?service=stand-in&scope=repository:public/app:pull",
                None
            ),
            (
                "HEAD",
                "/v2/public/app/manifests/v3",
                Some("Bearer anon-public/app")
            ),
        ]
    );
}

#[test]
fn a_token_service_that_answers_without_end_is_refused_unread() {
    let registry = Registry::start();
    let run = resolve(&[&registry.image("endless/app:v1")]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("over 1 MiB"), "{}", run.stderr);
}

#[test]
fn resolve_sends_the_token_file_and_never_prints_it() {
    let registry = Registry::start();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("registry-token");
    std::fs::write(&token_file, format!("{SECRET}\n")).unwrap();
    let image = registry.image("secret/app:v9");
    let run = resolve(&["--token-file", token_file.to_str().unwrap(), &image]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        format!("{image}@{}\n", sha256(&registry.body("secret/app", "v9")))
    );
    let seen = registry.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(format!("Bearer {SECRET}").as_str())
    );
    assert!(!run.stdout.contains(SECRET) && !run.stderr.contains(SECRET));
}

#[test]
fn resolve_with_a_rejected_token_names_the_option_not_the_token() {
    let registry = Registry::start();
    let dir = tempfile::tempdir().unwrap();
    let wrong = "glt_wrong_0000_token_value";
    let token_file = dir.path().join("registry-token");
    std::fs::write(&token_file, wrong).unwrap();
    let run = resolve(&[
        "--token-file",
        token_file.to_str().unwrap(),
        &registry.image("secret/app:v9"),
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("refused the token from --token-file"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stdout.contains(wrong) && !run.stderr.contains(wrong),
        "{}",
        run.stderr
    );
    // The user's token is never offered to the token service the registry names.
    assert!(
        registry
            .seen()
            .iter()
            .all(|s| !s.path.starts_with("/token"))
    );
}

#[test]
fn resolve_without_credentials_for_a_private_repository_says_what_to_pass() {
    let registry = Registry::start();
    let run = resolve(&[&registry.image("secret/app:v9")]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("pass --token-file <file>"),
        "{}",
        run.stderr
    );
}

#[test]
fn unusable_token_files_exit_2_without_quoting_them() {
    let dir = tempfile::tempdir().unwrap();
    let run = resolve(&["--token-file", "/nonexistent/token", "app:v1"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("/nonexistent/token"), "{}", run.stderr);

    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    let run = resolve(&["--token-file", empty.to_str().unwrap(), "app:v1"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("is empty"), "{}", run.stderr);

    let two_lines = dir.path().join("two");
    std::fs::write(&two_lines, "first-secret-part\nsecond-secret-part\n").unwrap();
    let run = resolve(&["--token-file", two_lines.to_str().unwrap(), "app:v1"]);
    assert_eq!(run.code, 2);
    assert!(!run.stderr.contains("secret-part"), "{}", run.stderr);
}

#[test]
fn resolve_leaves_a_pinned_reference_alone_without_asking() {
    let registry = Registry::start();
    let pinned = registry.image(&format!("team/web:v1@sha256:{HEX64}"));
    let run = resolve(&[&pinned]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, format!("{pinned}\n"));
    assert!(registry.seen().is_empty());
}

#[test]
fn resolve_over_https_against_a_plain_http_registry_fails_cleanly() {
    let registry = Registry::start();
    let image = registry.image("team/web:v1");
    let run = guard(&["--resolve", "--timeout", "5s", &image]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("cannot resolve `{image}`")),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("https://"), "{}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

#[test]
fn resolve_unparsable_reference_exits_2_before_any_request() {
    let registry = Registry::start();
    let run = resolve(&[&registry.image("team/web:v1"), "Team/Web:v1"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(run.stdout, "");
    assert!(registry.seen().is_empty());
}
