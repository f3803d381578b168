//! The check of the image an update writes, in its registry (docs/images.md): started once for
//! the whole run, before the clusters are connected, and awaited by each cluster beside its
//! reads (so it costs no time of its own unless the registry is slower than the cluster);
//! then judged per cluster against the platforms its pods can land on.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use serde_json::Value;

use crate::error::AppError;
use crate::settings::{ImageCheckMode, Mode, Settings};
use crate::streams;
use appupdate_kube::cluster::Cluster;
use appupdate_kube::registry::{self, Resolved, Unresolved};
use appupdate_model::image::{
    ImageRef, PlacementNeeds, Platform, missing_platforms, node_platforms, platform_list,
    same_image,
};
use appupdate_model::plan::{CheckedImage, ImageReport, PlatformCheck};
use appupdate_model::text::Untrusted;

/// What the registry said of the image, shared by every cluster of the run.
pub(crate) type Checked = Option<Arc<Result<Resolved, Unresolved>>>;

/// The check, started once; each cluster awaits a clone.
pub(crate) type SharedCheck = Shared<BoxFuture<'static, Checked>>;

/// The image the run checks: `--image` of an update, when the check is on.
pub(crate) fn image_of(settings: &Settings) -> Option<&str> {
    if !settings.image_check.on() {
        return None;
    }
    match &settings.mode {
        Mode::Update { changes, .. } => changes.container_update.image.as_deref(),
        // A saved plan's image, when the plan did not pin it: every cluster of a plan writes
        // the same one.
        Mode::Apply { saved, .. } => saved
            .file
            .clusters
            .iter()
            .filter_map(|c| c.plan.image_checked.as_ref())
            .find(|i| !i.pinned)
            .map(|i| i.image.as_str()),
        Mode::Undo { .. } => None,
    }
}

/// What the check asks the registry for: [`image_of`], except that with `--image-key` a saved
/// plan that pinned its image has it checked too, by the digest it recorded (for the
/// signature only: the tag may have moved).
fn reference_of(settings: &Settings) -> Option<String> {
    match &settings.mode {
        Mode::Apply { saved, .. }
            if settings.image_check.on() && settings.image_check.key.is_some() =>
        {
            saved
                .file
                .clusters
                .iter()
                .filter_map(|c| c.plan.image_checked.as_ref())
                .find(|i| !i.pinned)
                .or_else(|| {
                    saved
                        .file
                        .clusters
                        .iter()
                        .find_map(|c| c.plan.image_checked.as_ref())
                })
                .map(|i| {
                    if i.pinned {
                        ImageRef::pinned(&i.image, &i.digest)
                    } else {
                        i.image.clone()
                    }
                })
        }
        _ => image_of(settings).map(str::to_owned),
    }
}

/// `apply FILE` of a plan that did not pin its image: the tag must still name the digest the
/// plan recorded, or what was reviewed is no longer what would run (exit 5, nothing written).
/// With `--image-key`, the digest written (pinned or not) must carry a signature by it (exit 3).
pub(crate) fn saved_still_holds(
    settings: &Settings,
    recorded: &CheckedImage,
    checked: &Result<Resolved, Unresolved>,
) -> Result<(), AppError> {
    let key = settings.image_check.key.as_ref();
    if recorded.pinned && key.is_none() {
        return Ok(());
    }
    let file = settings
        .saved()
        .map(|s| Untrusted(&s.name).to_string())
        .unwrap_or_default();
    let image = Untrusted(&recorded.image);
    let old = Untrusted(&recorded.digest);
    let moved = |now: String| AppError::Drift {
        message: format!(
            "{file} was made when the image {image} was {old}, and {now}: what was reviewed is no longer what the tag means, so nothing was written; make the plan again (with --pin-digest a plan writes the digest, and the tag moving changes nothing)"
        ),
    };
    let signed = |r: &Resolved| match (key, &r.signature) {
        (Some(k), Some(Err(unsigned))) => Err(AppError::Image {
            message: format!(
                "{file}: the image {image}: {}; nothing was written",
                unsigned.explain(&r.digest, &k.named)
            ),
        }),
        _ => Ok(()),
    };
    match checked {
        Ok(r) if recorded.pinned || r.digest == recorded.digest => signed(r),
        Ok(r) => Err(moved(format!("the tag now names {}", Untrusted(&r.digest)))),
        Err(Unresolved::NotFound(why)) if !recorded.pinned => Err(moved(format!("now {why}"))),
        Err(why) if key.is_some() => Err(AppError::Image {
            message: format!(
                "{file}: the image {image} could not be checked ({} needs its signature): {why}; nothing was written",
                key.map(|k| k.named.as_str()).unwrap_or_default()
            ),
        }),
        Err(why) if settings.image_check.mode == ImageCheckMode::Require => Err(AppError::Image {
            message: format!(
                "{file}: the image {image} could not be checked (--image-check require): {why}; nothing was written"
            ),
        }),
        // Said once by [`warn_once`].
        Err(_) => Ok(()),
    }
}

/// Starts the check (nothing to do without an image to check). With `--image-key`, the
/// signature is looked for in the same check: once for a whole fleet.
pub(crate) fn start(settings: &Settings) -> SharedCheck {
    let image = reference_of(settings);
    let registry = settings.image_check.registry.clone();
    let key = settings.image_check.key.as_ref().map(|k| k.key.clone());
    if image.is_some()
        && let Some(problem) = &settings.image_check.config_problem
    {
        streams::warning(problem);
    }
    async move {
        let image = image?;
        Some(Arc::new(
            registry::resolve_signed(&image, &registry, key.as_deref()).await,
        ))
    }
    .boxed()
    .shared()
}

/// Under `auto`, a registry that cannot tell or cannot be reached is a warning, said once for
/// the run (a refusal is said by the clusters' planning). Not with `--image-key`: a signature
/// that cannot be checked is a refusal.
pub(crate) fn warn_once(settings: &Settings, checked: &Checked) {
    let (Some(image), Some(checked)) = (image_of(settings), checked) else {
        return;
    };
    if settings.image_check.mode != ImageCheckMode::Auto || settings.image_check.key.is_some() {
        return;
    }
    match checked.as_ref() {
        Ok(_) | Err(Unresolved::NotFound(_)) => {}
        Err(why) => streams::warning(&format!(
            "the image {} was not checked: {why}; going on (--image-check auto)",
            Untrusted(image)
        )),
    }
}

/// The platforms of the cluster's nodes (their `kubernetes.io/os`/`arch` labels, read as
/// metadata); `Err(why)` when they cannot be listed.
pub(crate) async fn node_list(cluster: &Cluster) -> Result<Vec<Platform>, String> {
    match cluster.list_node_metadata().await {
        Ok(list) => Ok(node_platforms(&list)),
        Err(e) => Err(match e.status_code() {
            Some(403) => "nodes may not be listed (403)".to_owned(),
            Some(code) => format!("the node list answered {code}"),
            None => "the node list failed".to_owned(),
        }),
    }
}

/// What the check makes of the image for one cluster: the lines the plan shows, and the image
/// to write instead of the one given (`--pin-digest`, or the live spelling of the same image).
#[derive(Debug, Default)]
pub(crate) struct Judged {
    pub notes: Vec<String>,
    pub write: Option<String>,
    /// The digest the tag named, when the registry told it.
    pub digest: Option<String>,
    /// `--image-key`'s fingerprint, when a signature by it over `digest` was verified.
    pub signed_by: Option<String>,
    /// All of it as data, for `-o json`.
    pub report: ImageReport,
}

/// Platforms as the document names them (`linux/arm64/v8`), their strings as the registry gave
/// them (the document's writer escapes what needs it).
fn platform_names(platforms: &[Platform]) -> Vec<String> {
    platforms
        .iter()
        .map(|p| match p.variant.as_deref().filter(|v| !v.is_empty()) {
            Some(v) => format!("{}/{}/{v}", p.os, p.arch),
            None => format!("{}/{}", p.os, p.arch),
        })
        .collect()
}

/// The container the change is for, in the live Deployment: the named one, else the only one.
fn live_container<'a>(deployment: &'a Value, container: Option<&str>) -> Option<&'a Value> {
    let containers = deployment
        .pointer("/spec/template/spec/containers")?
        .as_array()?;
    match container {
        Some(name) => containers
            .iter()
            .find(|c| c.get("name").and_then(Value::as_str) == Some(name)),
        None if containers.len() == 1 => containers.first(),
        None => None,
    }
}

/// Judges the registry's answer for one cluster (see the module docs): a refusal names the
/// image and what is missing; nothing has been written.
pub(crate) async fn judge(
    settings: &Settings,
    cluster: &Cluster,
    image: &str,
    checked: &Result<Resolved, Unresolved>,
    nodes: Result<Vec<Platform>, String>,
    deployment: Option<&Value>,
    container: Option<&str>,
) -> Result<Judged, AppError> {
    let check = &settings.image_check;
    let shown = Untrusted(image);
    let refuse = |what: String| AppError::Image {
        message: format!("--image {shown}: {what}; nothing was written"),
    };
    let key = check.key.as_ref();
    let resolved = match checked {
        Ok(r) => r,
        Err(Unresolved::NotFound(why)) => return Err(refuse(why.clone())),
        // A signature that cannot be checked fails closed, under `auto` too.
        Err(why) if key.is_some() || check.mode == ImageCheckMode::Require || check.pin_digest => {
            let flag = if let Some(k) = key {
                format!("{} needs its signature", k.named)
            } else if check.mode == ImageCheckMode::Require {
                "--image-check require".to_owned()
            } else {
                "--pin-digest needs its digest".to_owned()
            };
            return Err(refuse(format!(
                "the image could not be checked ({flag}): {why}"
            )));
        }
        Err(why) => {
            return Ok(Judged {
                notes: vec![format!("image {shown}: not checked ({why})")],
                write: None,
                digest: None,
                signed_by: None,
                report: ImageReport {
                    reference: image.to_owned(),
                    written: image.to_owned(),
                    not_checked: Some(why.to_string()),
                    ..ImageReport::default()
                },
            });
        }
    };
    let mut report = ImageReport {
        reference: image.to_owned(),
        digest: Some(resolved.digest.clone()),
        platforms: platform_names(&resolved.platforms),
        pinned: check.pin_digest,
        ..ImageReport::default()
    };
    let mut notes = vec![format!(
        "image {} → {} ({})",
        Untrusted(resolved.image.to_string()),
        Untrusted(&resolved.digest),
        if resolved.platforms.is_empty() {
            "no platform named".to_owned()
        } else {
            platform_list(&resolved.platforms)
        }
    )];
    // The signature first: an image not signed by the key is refused whatever it runs on.
    let signed_by = match (key, &resolved.signature) {
        (None, _) => None,
        (Some(k), Some(Ok(layout))) => {
            notes.push(format!(
                "signature: cosign, by {} ({}; no transparency log checked)",
                k.named,
                layout.describe()
            ));
            Some(k.key.fingerprint().to_owned())
        }
        (Some(k), Some(Err(unsigned))) => {
            return Err(refuse(unsigned.explain(&resolved.digest, &k.named)));
        }
        (Some(_), None) => return Err(refuse("its signature was not looked for".to_owned())),
    };
    let context = Untrusted(&cluster.conn.context);
    let template = deployment.and_then(|d| d.pointer("/spec/template/spec"));
    let needs = template
        .map(PlacementNeeds::of_pod_spec)
        .unwrap_or_default();
    let live_image = deployment
        .and_then(|d| live_container(d, container))
        .and_then(|c| c.get("image"))
        .and_then(Value::as_str);
    let cannot_tell = |why: String, notes: &mut Vec<String>| -> Result<String, AppError> {
        if check.mode == ImageCheckMode::Require {
            return Err(refuse(format!(
                "its platforms could not be checked (--image-check require): {why}"
            )));
        }
        streams::warning(&format!(
            "the platforms of the image {shown} were not checked in context {context}: {why}; going on (--image-check auto)"
        ));
        notes.push(format!("platforms not checked: {why}"));
        Ok(why)
    };
    let nodes = nodes.and_then(|list| {
        if list.is_empty() {
            Err("no node carries the kubernetes.io/os and kubernetes.io/arch labels".to_owned())
        } else {
            Ok(list)
        }
    });
    if resolved.platforms.is_empty() {
        report.not_checked = Some(cannot_tell(
            "the registry names no platform for it".to_owned(),
            &mut notes,
        )?);
    } else {
        match nodes {
            Ok(list) => {
                let admitted: Vec<Platform> =
                    list.into_iter().filter(|p| needs.admits(p)).collect();
                let missing = missing_platforms(&resolved.platforms, &admitted);
                if !missing.is_empty() {
                    return Err(refuse(format!(
                        "it has no image for {}, the platform of nodes the pods of {} can land on in context {context} (it is built for {}); build it for {} too, or require a platform with the pod template's nodeSelector or node affinity (kubernetes.io/arch)",
                        platform_list(&missing),
                        Untrusted(&settings.app),
                        platform_list(&resolved.platforms),
                        platform_list(&missing),
                    )));
                }
                report.platform_check = PlatformCheck::Nodes;
                report.checked_against = platform_names(&admitted);
                if admitted.is_empty() {
                    notes.push(
                        "platforms: no node matches the pod template's kubernetes.io/os and kubernetes.io/arch constraints".to_owned(),
                    );
                } else {
                    notes.push(format!(
                        "platforms checked against the nodes the pods can land on: {}",
                        platform_list(&admitted)
                    ));
                }
            }
            Err(why) => match live_image {
                None => {
                    report.not_checked = Some(cannot_tell(
                        format!("{why}, and the Deployment has no live image to compare with"),
                        &mut notes,
                    )?);
                }
                Some(live) => match registry::resolve(live, &check.registry).await {
                    Ok(old) => {
                        let missing = missing_platforms(&resolved.platforms, &old.platforms);
                        if !missing.is_empty() {
                            return Err(refuse(format!(
                                "it has no image for {}, which the live image {} has ({why} in context {context}, so the new image must cover every platform of the live one; it is built for {})",
                                platform_list(&missing),
                                Untrusted(live),
                                platform_list(&resolved.platforms),
                            )));
                        }
                        notes.push(format!(
                            "platforms checked against the live image {} ({}): {why}",
                            Untrusted(live),
                            platform_list(&old.platforms)
                        ));
                        report.platform_check = PlatformCheck::LiveImage;
                        report.checked_against = platform_names(&old.platforms);
                        report.live_image = Some(live.to_owned());
                    }
                    Err(e) => {
                        report.not_checked = Some(cannot_tell(
                            format!(
                                "{why}, and the live image {} was not resolved: {e}",
                                Untrusted(live)
                            ),
                            &mut notes,
                        )?);
                    }
                },
            },
        }
    }
    let write = if check.pin_digest {
        Some(ImageRef::pinned(image, &resolved.digest))
    } else {
        // The live image spelled with the digest the tag has now (an admission controller
        // pinned it): the same image, nothing to change.
        live_image
            .filter(|live| *live != image && same_image(live, image, Some(&resolved.digest)))
            .map(|live| {
                notes.push(format!(
                    "the live image {} is this image (the tag's digest): no change",
                    Untrusted(live)
                ));
                live.to_owned()
            })
    };
    report.written = write.clone().unwrap_or_else(|| image.to_owned());
    Ok(Judged {
        notes,
        write,
        digest: Some(resolved.digest.clone()),
        signed_by,
        report,
    })
}
