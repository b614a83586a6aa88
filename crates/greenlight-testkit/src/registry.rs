//! A real OCI registry for tests: Debian's `docker-registry` (the CNCF distribution registry,
//! `/usr/bin/docker-registry serve <config>`) run as a child process on a loopback port, with
//! filesystem storage in a temporary directory and no auth. Never a system service: each
//! [`Registry`] starts its own and kills it when dropped. [`Registry::push`] pushes a small
//! image over the distribution HTTP API (config blob, one layer blob, manifest), so a test
//! knows the digest the registry serves for a tag; pushing other content to the same tag moves
//! the tag.
//!
//! `scripts/test` installs the binary when it is missing. The registry answers `GET /v2/` a few
//! tens of milliseconds after it starts; [`Registry::start`] polls for that answer with a bound.

use crate::http::{Response, http_send};
use crate::process::Proc;
use sha2::{Digest as _, Sha256};
use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long start-up may take before the registry answers `GET /v2/`.
const START_WITHIN: Duration = Duration::from_secs(30);

/// How often start-up asks the registry again.
const POLL: Duration = Duration::from_millis(20);

/// The manifest media type a push uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ManifestKind {
    /// `application/vnd.oci.image.manifest.v1+json`.
    Oci,
    /// `application/vnd.docker.distribution.manifest.v2+json` (Docker's schema 2).
    DockerV2,
}

impl ManifestKind {
    /// The manifest's media type.
    pub fn media_type(self) -> &'static str {
        match self {
            ManifestKind::Oci => "application/vnd.oci.image.manifest.v1+json",
            ManifestKind::DockerV2 => "application/vnd.docker.distribution.manifest.v2+json",
        }
    }

    fn config_type(self) -> &'static str {
        match self {
            ManifestKind::Oci => "application/vnd.oci.image.config.v1+json",
            ManifestKind::DockerV2 => "application/vnd.docker.container.image.v1+json",
        }
    }

    fn layer_type(self) -> &'static str {
        match self {
            ManifestKind::Oci => "application/vnd.oci.image.layer.v1.tar",
            ManifestKind::DockerV2 => "application/vnd.docker.image.rootfs.diff.tar",
        }
    }
}

/// The OCI image index media type ([`Registry::push_index`]).
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// A running `docker-registry`; killed (SIGKILL) when dropped.
pub struct Registry {
    // Declared first: the process dies before its directory is removed.
    proc: Proc,
    host: String,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// The binary: `/usr/bin/docker-registry`, else `docker-registry` on `PATH`. Panics, saying
    /// how to get it, when there is none.
    #[track_caller]
    pub fn binary() -> PathBuf {
        crate::process::find_tool(
            "docker-registry",
            &["/usr/bin/docker-registry"],
            "the docker-registry binary is missing (no /usr/bin/docker-registry, none on \
             PATH): run scripts/test, which installs Debian's docker-registry package \
             (or: apt-get install -y --no-install-recommends docker-registry, with a \
             /usr/sbin/policy-rc.d that exits 101 so its service does not start)",
        )
    }

    /// `docker-registry --version`'s first line.
    pub fn version() -> String {
        crate::process::first_line_of(&Self::binary(), &["--version"])
    }

    /// Starts a registry on a free port of 127.0.0.1, empty, and returns once it answers
    /// `GET /v2/` with 200.
    #[track_caller]
    pub fn start() -> Registry {
        let binary = Self::binary();
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("config.yml");
        let data = dir.path().join("data");

        // A free port is found by binding and letting go; another process may take it in
        // between, so a start that loses the port is tried again.
        let mut last_output = String::new();
        for _ in 0..3 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("find a free port")
                .port();
            let host = format!("127.0.0.1:{port}");
            // `http.secret` set so the registry does not warn that it made one up; upload
            // purging off, as no upload outlives a test; deletes on, so a test may remove a
            // manifest.
            std::fs::write(
                &config,
                format!(
                    "version: 0.1\n\
                     log:\n  level: info\n  accesslog:\n    disabled: true\n\
                     storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n  \
                     maintenance:\n    uploadpurging:\n      enabled: false\n\
                     http:\n  addr: {host}\n  secret: greenlight-testkit\n",
                    data.display()
                ),
            )
            .expect("write the registry's config.yml");
            let mut proc = Proc::spawn(&binary, ["serve".as_ref(), config.as_os_str()], &[]);
            let end = Instant::now() + START_WITHIN;
            let ready = loop {
                if !proc.is_running() {
                    proc.wait_exit(Duration::from_secs(5));
                    break false;
                }
                let answer = http_send("GET", &format!("http://{host}/v2/"), &[], "");
                if answer.is_ok_and(|r| r.status == 200) {
                    break true;
                }
                assert!(
                    Instant::now() < end,
                    "docker-registry did not answer GET /v2/ within {START_WITHIN:?}; output:\n{}",
                    proc.output()
                );
                std::thread::sleep(POLL);
            };
            if !ready {
                last_output = proc.output();
                if last_output.contains("address already in use") {
                    continue;
                }
                panic!("docker-registry exited before it was ready; output:\n{last_output}");
            }
            return Registry {
                proc,
                host,
                _dir: dir,
            };
        }
        panic!("docker-registry found no free port in three tries; output:\n{last_output}");
    }

    /// `127.0.0.1:<port>`: the registry part of an image reference.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.host)
    }

    /// `127.0.0.1:<port>/<name>`: `name` (`repository:tag`, `repository@digest`) on this
    /// registry.
    pub fn image(&self, name: &str) -> String {
        format!("{}/{name}", self.host)
    }

    /// The registry's output so far (its log lines).
    pub fn output(&self) -> String {
        self.proc.output()
    }

    /// Pushes an OCI image whose one layer is `layer` to `repository:tag` and returns the
    /// manifest's digest (`sha256:…`) as the registry reports it. Different `layer` text makes
    /// a different image; pushing it to a tag that exists moves the tag.
    #[track_caller]
    pub fn push(&self, repository: &str, tag: &str, layer: &str) -> String {
        self.push_as(repository, tag, layer, ManifestKind::Oci)
    }

    /// As [`Registry::push`], with the manifest of `kind`.
    #[track_caller]
    pub fn push_as(&self, repository: &str, tag: &str, layer: &str, kind: ManifestKind) -> String {
        let config = serde_json::json!({
            "architecture": "amd64",
            "os": "linux",
            "config": {"Labels": {"greenlight.test/layer": layer}},
            "rootfs": {"type": "layers", "diff_ids": [sha256(layer)]},
        })
        .to_string();
        let config_digest = self.push_blob(repository, &config);
        let layer_digest = self.push_blob(repository, layer);
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": kind.media_type(),
            "config": {
                "mediaType": kind.config_type(),
                "digest": config_digest,
                "size": config.len(),
            },
            "layers": [{
                "mediaType": kind.layer_type(),
                "digest": layer_digest,
                "size": layer.len(),
            }],
        })
        .to_string();
        self.push_manifest(repository, tag, kind.media_type(), &manifest)
    }

    /// Pushes an OCI image index naming `manifests` (digests of OCI image manifests already in
    /// `repository`, each given as linux/amd64, linux/arm64, … in turn) to `repository:tag`;
    /// returns the index's digest as the registry reports it.
    #[track_caller]
    pub fn push_index(&self, repository: &str, tag: &str, manifests: &[&str]) -> String {
        const ARCHES: [&str; 4] = ["amd64", "arm64", "ppc64le", "s390x"];
        assert!(
            manifests.len() <= ARCHES.len(),
            "at most {} manifests",
            ARCHES.len()
        );
        let entries: Vec<serde_json::Value> = manifests
            .iter()
            .zip(ARCHES)
            .map(|(digest, arch)| {
                let size = self.manifest_size(repository, digest);
                serde_json::json!({
                    "mediaType": ManifestKind::Oci.media_type(),
                    "digest": digest,
                    "size": size,
                    "platform": {"architecture": arch, "os": "linux"},
                })
            })
            .collect();
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": entries,
        })
        .to_string();
        self.push_manifest(repository, tag, OCI_INDEX, &index)
    }

    /// Uploads `content` as a blob of `repository` (a monolithic upload: `POST` for an upload
    /// location, then `PUT <location>&digest=…`) and returns its digest.
    #[track_caller]
    pub fn push_blob(&self, repository: &str, content: &str) -> String {
        let digest = sha256(content);
        let started = self.send(
            "POST",
            &format!("{}/v2/{repository}/blobs/uploads/", self.url()),
            &[],
            "",
        );
        assert_eq!(
            started.status,
            202,
            "POST /v2/{repository}/blobs/uploads/: {started:?}\nregistry output:\n{}",
            self.output()
        );
        let location = started
            .header("location")
            .unwrap_or_else(|| panic!("no Location in {started:?}"));
        let location = if location.starts_with('/') {
            format!("{}{location}", self.url())
        } else {
            location.to_string()
        };
        let sep = if location.contains('?') { '&' } else { '?' };
        let done = self.send(
            "PUT",
            &format!("{location}{sep}digest={digest}"),
            &[("Content-Type", "application/octet-stream")],
            content,
        );
        assert_eq!(
            done.status,
            201,
            "PUT the blob {digest} of {repository}: {done:?}\nregistry output:\n{}",
            self.output()
        );
        assert_eq!(done.header("docker-content-digest"), Some(digest.as_str()));
        digest
    }

    /// `PUT /v2/<repository>/manifests/<reference>` of `manifest` as `media_type`; returns the
    /// digest the registry reports (`Docker-Content-Digest`), checked against the sha256 of the
    /// bytes sent.
    #[track_caller]
    pub fn push_manifest(
        &self,
        repository: &str,
        reference: &str,
        media_type: &str,
        manifest: &str,
    ) -> String {
        let response = self.send(
            "PUT",
            &format!("{}/v2/{repository}/manifests/{reference}", self.url()),
            &[("Content-Type", media_type)],
            manifest,
        );
        assert_eq!(
            response.status,
            201,
            "PUT /v2/{repository}/manifests/{reference}: {response:?}\nregistry output:\n{}",
            self.output()
        );
        let reported = response
            .header("docker-content-digest")
            .unwrap_or_else(|| panic!("no Docker-Content-Digest in {response:?}"))
            .to_string();
        assert_eq!(
            reported,
            sha256(manifest),
            "the registry's digest is not the sha256 of the manifest sent"
        );
        reported
    }

    /// `DELETE /v2/<repository>/manifests/<digest>`: the manifest and every tag naming it.
    #[track_caller]
    pub fn delete_manifest(&self, repository: &str, digest: &str) {
        let response = self.send(
            "DELETE",
            &format!("{}/v2/{repository}/manifests/{digest}", self.url()),
            &[],
            "",
        );
        assert_eq!(
            response.status,
            202,
            "DELETE /v2/{repository}/manifests/{digest}: {response:?}\nregistry output:\n{}",
            self.output()
        );
    }

    /// The `Docker-Content-Digest` the registry answers a `HEAD` of
    /// `/v2/<repository>/manifests/<reference>` with, accepting every manifest type; `None`
    /// when it has no such manifest.
    #[track_caller]
    pub fn digest_of(&self, repository: &str, reference: &str) -> Option<String> {
        let accept = [
            OCI_INDEX,
            ManifestKind::Oci.media_type(),
            ManifestKind::DockerV2.media_type(),
        ]
        .join(", ");
        let response = self.send(
            "HEAD",
            &format!("{}/v2/{repository}/manifests/{reference}", self.url()),
            &[("Accept", &accept)],
            "",
        );
        match response.status {
            200 => response.header("docker-content-digest").map(str::to_string),
            404 => None,
            _ => panic!(
                "HEAD /v2/{repository}/manifests/{reference}: {response:?}\nregistry output:\n{}",
                self.output()
            ),
        }
    }

    #[track_caller]
    fn manifest_size(&self, repository: &str, digest: &str) -> usize {
        let response = self.send(
            "GET",
            &format!("{}/v2/{repository}/manifests/{digest}", self.url()),
            &[("Accept", ManifestKind::Oci.media_type())],
            "",
        );
        assert_eq!(response.status, 200, "GET {digest}: {response:?}");
        response.body.len()
    }

    #[track_caller]
    fn send(&self, method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> Response {
        http_send(method, url, headers, body).unwrap_or_else(|e| {
            panic!(
                "{method} {url}: {e}\nregistry output:\n{}",
                self.proc.output()
            )
        })
    }
}

/// `sha256:<hex>` of `content`'s bytes.
pub fn sha256(content: &str) -> String {
    let hash = Sha256::digest(content.as_bytes());
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_push_is_served_by_tag_and_a_second_push_moves_the_tag() {
        let registry = Registry::start();
        assert!(Registry::version().contains("docker-registry"));
        let first = registry.push("team/web", "v1", "layer one");
        assert_eq!(registry.digest_of("team/web", "v1"), Some(first.clone()));
        assert_eq!(registry.digest_of("team/web", &first), Some(first.clone()));
        let second = registry.push_as("team/web", "v1", "layer two", ManifestKind::DockerV2);
        assert_ne!(first, second);
        assert_eq!(registry.digest_of("team/web", "v1"), Some(second.clone()));
        // The first image stays, by digest.
        assert_eq!(registry.digest_of("team/web", &first), Some(first.clone()));
        assert_eq!(registry.digest_of("team/web", "v2"), None);

        let index = registry.push_index("team/web", "multi", &[&first]);
        assert_eq!(registry.digest_of("team/web", "multi"), Some(index.clone()));

        registry.delete_manifest("team/web", &second);
        assert_eq!(registry.digest_of("team/web", "v1"), None);
    }

    #[test]
    fn sha256_is_the_digest_grammar() {
        assert_eq!(
            sha256(""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
