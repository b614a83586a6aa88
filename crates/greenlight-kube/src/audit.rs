//! What `greenlight audit --source kube` reads: every Application (of one namespace, or all),
//! page by page, each decoded on its own as the source decodes it, and Argo CD Image Updater's
//! `ImageUpdater` resources of every namespace — which only the Kubernetes API serves.

use crate::source::{application_resource, decode};
use greenlight_argocd::Application;
use greenlight_argocd::audit::{
    IMAGE_UPDATER_GROUP, IMAGE_UPDATER_PLURAL, IMAGE_UPDATER_VERSION, ImageUpdater,
};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Client, ResourceExt};

/// How many objects one list request asks for.
const PAGE: u32 = 500;

/// What was read of the `ImageUpdater` resources.
#[derive(Debug)]
pub enum Updaters {
    /// Listed (perhaps none).
    Read(Vec<ImageUpdater>),
    /// The API does not serve the resource: Image Updater v1 is not installed.
    NotInstalled,
    /// They could not be listed (forbidden, …): why, in words.
    NotRead(String),
}

/// One Application, or why it could not be read (naming it).
pub type AppRead = Result<Application, String>;

/// Image Updater's resource.
pub fn image_updater_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(IMAGE_UPDATER_GROUP, IMAGE_UPDATER_VERSION, "ImageUpdater"),
        IMAGE_UPDATER_PLURAL,
    )
}

async fn list_all(api: &Api<DynamicObject>) -> Result<Vec<DynamicObject>, kube::Error> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(PAGE);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list(&lp).await?;
        out.extend(page.items);
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return Ok(out),
        }
    }
}

fn describe(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({})", s.message, s.code),
        other => other.to_string(),
    }
}

/// The Applications of `namespace` (all namespaces when `None`).
pub async fn list_applications(
    client: &Client,
    namespace: Option<&str>,
) -> Result<Vec<AppRead>, String> {
    let ar = application_resource();
    let api = match namespace {
        Some(ns) => Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ar),
        None => Api::<DynamicObject>::all_with(client.clone(), &ar),
    };
    let objects = list_all(&api).await.map_err(|e| {
        format!(
            "cannot list Applications ({}): {}",
            namespace.map_or("all namespaces".to_string(), |ns| format!("namespace {ns}")),
            describe(&e)
        )
    })?;
    Ok(objects.iter().map(decode).collect())
}

/// Every `ImageUpdater` resource of the cluster: they may select the Applications of another
/// namespace than their own.
pub async fn list_image_updaters(client: &Client) -> Updaters {
    let api = Api::<DynamicObject>::all_with(client.clone(), &image_updater_resource());
    match list_all(&api).await {
        Ok(objects) => {
            let mut read = Vec::new();
            for obj in &objects {
                let name = format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any());
                match serde_json::to_value(obj).and_then(serde_json::from_value::<ImageUpdater>) {
                    Ok(u) => read.push(u),
                    Err(e) => {
                        return Updaters::NotRead(format!(
                            "ImageUpdater {name} could not be read: {e}"
                        ));
                    }
                }
            }
            Updaters::Read(read)
        }
        Err(kube::Error::Api(s)) if s.code == 404 => Updaters::NotInstalled,
        Err(e) => Updaters::NotRead(format!(
            "cannot list ImageUpdater resources ({IMAGE_UPDATER_GROUP}): {}",
            describe(&e)
        )),
    }
}
