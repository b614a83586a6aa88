//! A `kube::Client` built as kubectl finds its configuration: an explicit kubeconfig file when
//! one is given, else `kube::Config::infer`'s order (`$KUBECONFIG`, else `~/.kube/config`, else
//! the in-cluster service account at `/var/run/secrets/kubernetes.io/serviceaccount` with
//! `KUBERNETES_SERVICE_HOST`/`_PORT`).

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// Why no client could be built; each names the file or the source it tried.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error(
        "no Kubernetes configuration found (tried $KUBECONFIG, ~/.kube/config and the in-cluster \
         service account): {0}; give --kubeconfig <file>"
    )]
    Infer(#[source] kube::config::InferConfigError),
    #[error("Kubernetes client for {cluster}: {source}")]
    Client {
        cluster: String,
        #[source]
        source: kube::Error,
    },
}

/// The configuration: from `kubeconfig` when given (its current context), else inferred.
pub async fn config(kubeconfig: Option<&Path>) -> Result<Config, ClientError> {
    match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).map_err(|source| ClientError::Kubeconfig {
                path: path.to_path_buf(),
                source,
            })?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|source| ClientError::Kubeconfig {
                    path: path.to_path_buf(),
                    source,
                })
        }
        None => Config::infer().await.map_err(ClientError::Infer),
    }
}

/// A client for `kubeconfig` (see [`config`]). Needs a rustls crypto provider installed as the
/// process default (the binary installs ring's at start).
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, ClientError> {
    let config = config(kubeconfig).await?;
    let cluster = config.cluster_url.to_string();
    Client::try_from(config).map_err(|source| ClientError::Client { cluster, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_kubeconfig_is_named() {
        let Err(err) = client(Some(Path::new("/nonexistent/kubeconfig"))).await else {
            panic!("a client from a missing file");
        };
        let err = err.to_string();
        assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
    }

    #[tokio::test]
    async fn a_malformed_kubeconfig_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(&path, "clusters: [oops\n").unwrap();
        let Err(err) = client(Some(&path)).await else {
            panic!("a client from a malformed file");
        };
        let err = err.to_string();
        assert!(err.contains(&path.display().to_string()), "{err}");
    }
}
