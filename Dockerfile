# The greenlight image: the binary and git (greenlight runs git for its fetches and reverts),
# run as uid 65532 on a read-only root filesystem. What deploy/helm/greenlight runs:
#
#   docker build -t registry.example.com/platform/greenlight:0.1.0 .
#
# Every base image is pinned by the digest of its multi-arch index. No container registry is
# reachable where this file was written, so each digest is one that public Dockerfiles and
# BuildKit logs show docker.io resolving for the tag (found in a code search of public
# repositories, 2026). To move to a newer base, resolve the tag again
# (`docker buildx imagetools inspect <image:tag>`) and change the tag and digest together.

# rust:1.95.0-bookworm (the workspace's rust-version, 1.95; Debian 12, glibc 2.36 as in the
# runtime stage). Digest: in a BuildKit log `FROM docker.io/library/rust:1.95-bookworm@sha256:
# 6258907a…` (2026-09-27) and in several public Dockerfiles pinning rust:1.95.0-bookworm.
FROM docker.io/library/rust:1.95.0-bookworm@sha256:6258907abe69656e41cd992e0b705cdcfabcbbe3db374f92ed2d47121282d4a1 AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
RUN cargo build --release --locked -p greenlight --bin greenlight \
    && install -D -m 0755 target/release/greenlight /out/greenlight

# debian:bookworm-slim. Digest: in the same BuildKit log, `FROM docker.io/library/debian:
# bookworm-slim@sha256:3783cc01…`, and in public test files pinning it (also through
# public.ecr.aws/docker/library, Docker Hub's mirror).
FROM docker.io/library/debian:bookworm-slim@sha256:3783cc01769c7b2b1b83a5c5ad96c815348e28ed7da68e2e3687004faa906251
# git and the CAs for HTTPS remotes and Argo CD. The user and group 65532, and the paths the
# chart mounts, owned by it: the clone (/var/lib/greenlight, --data-dir), the config directory
# (/etc/greenlight, --config), /tmp (an emptyDir in the chart; writable here without one).
RUN apt-get update \
    && apt-get install -y --no-install-recommends git ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 65532 greenlight \
    && useradd --uid 65532 --gid 65532 --home-dir /var/lib/greenlight --no-create-home \
       --shell /usr/sbin/nologin greenlight \
    && install -d -o 65532 -g 65532 -m 0750 /var/lib/greenlight \
    && install -d -o 65532 -g 65532 -m 0755 /etc/greenlight \
    && install -d -m 1777 /tmp
COPY --from=build /out/greenlight /usr/local/bin/greenlight
ENV HOME=/var/lib/greenlight \
    TMPDIR=/tmp
USER 65532:65532
WORKDIR /var/lib/greenlight
# --listen 0.0.0.0:9090: /metrics, /startupz, /healthz, /readyz.
EXPOSE 9090
ENTRYPOINT ["/usr/local/bin/greenlight"]
CMD ["--help"]
