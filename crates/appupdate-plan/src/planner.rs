//! Requested updates + live state → [`Plan`]. Pure: builds one updater per object the run may
//! touch and asks each for its change against the live object.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::history::History;
use crate::live::{LiveState, Needs};
use crate::routes::external_auth::GatewayKey;
use crate::routes::{self, LiveRef, LiveRoutes, WithLive, refs::RouteFlags};
use crate::updaters::{
    AutoscalerUpdate, AutoscalerUpdater, ChangeCause, ContainerUpdate, DeploymentUpdater, Plan,
    Planned, Updater,
};
use appupdate_model::endpoints_file::EndpointsFile;
use appupdate_model::plan::{AuthProvider, Kind, ObjectChange, PlanError, RouteStyle};

/// What the user asked for, independent of where it came from.
#[derive(Clone, Debug)]
pub struct UpdateRequest<'a> {
    pub app: &'a str,
    pub namespace: &'a str,
    pub context: &'a str,
    pub container: Option<&'a str>,
    pub container_update: &'a ContainerUpdate,
    pub autoscaler_update: &'a AutoscalerUpdate,
    pub endpoints: Option<&'a EndpointsFile>,
    /// `--routes` and the flags that say where routes attach and how they authenticate.
    pub routes: &'a RouteFlags,
    /// The history revision this request undoes (`--undo`), named in the change-cause.
    pub undo_of: Option<u64>,
}

impl UpdateRequest<'_> {
    /// The live objects this request needs to read.
    pub fn needs(&self) -> Needs {
        Needs {
            deployment: self.container_update.image.is_some(),
            autoscaler: self.autoscaler_update.min_replicas.is_some()
                || self.autoscaler_update.max_replicas.is_some(),
            endpoints: self.endpoints.is_some(),
            httproutes: self.endpoints.is_some()
                && self
                    .routes
                    .style
                    .is_some_and(|s| routes::style(s).kind() == Kind::HttpRoute),
            // The run's to ask for: it knows whether it records history.
            history: false,
            gateway: self
                .routes
                .gateway
                .as_ref()
                .filter(|_| self.routes.style == Some(RouteStyle::Gateway))
                .filter(|_| self.routes.auth_provider != Some(AuthProvider::EnvoyGateway))
                .filter(|_| {
                    self.endpoints
                        .is_some_and(|f| f.endpoints.iter().any(|e| !e.scopes.is_empty()))
                })
                .map(|g| GatewayKey::of_flag(g, self.namespace)),
            security_policies: self.endpoints.is_some()
                && self.routes.auth_provider == Some(AuthProvider::EnvoyGateway),
        }
    }

    /// The Gateways whose support for ExternalAuth the run must check once the first read
    /// round is in (scoped groups published as HTTPRoutes); `None`: no check.
    pub fn gateway_check(&self, live: &LiveState) -> Option<Vec<GatewayKey>> {
        self.endpoints.and_then(|file| {
            routes::needs_gateway_check(
                self.app,
                file,
                self.routes,
                &live.ingresses,
                &live.httproutes,
                self.namespace,
            )
        })
    }

    /// Whether the first read round leaves the IngressClasses to be read (a first exposure in
    /// an Ingress style without `--ingress-class`).
    pub fn needs_ingress_classes(&self, live: &LiveState) -> bool {
        self.endpoints.is_some_and(|file| {
            routes::needs_ingress_classes(
                self.app,
                file,
                self.routes,
                &live.ingresses,
                &live.httproutes,
            )
        })
    }
}

/// `updater` with the change `plan` asks it for.
fn planned(
    updater: Updater,
    plan: impl FnOnce(&Updater) -> Result<ObjectChange, PlanError>,
) -> Result<Planned, PlanError> {
    let change = plan(&updater)?;
    Ok(Planned::new(updater, Arc::new(change)))
}

/// The live routes the updaters start from, each moved out of `live` (a `null` left in its
/// place) when no later updater starts from it too, else copied.
fn given_up(live: &mut LiveState, updaters: &[WithLive]) -> Vec<Option<Value>> {
    let mut uses: HashMap<LiveRef, usize> = HashMap::with_capacity(updaters.len());
    for at in updaters.iter().filter_map(|(_, at)| *at) {
        *uses.entry(at).or_default() += 1;
    }
    updaters
        .iter()
        .map(|(_, at)| {
            let at = (*at)?;
            let slot = match at.kind {
                Kind::Ingress => live.ingresses.get_mut(at.index),
                Kind::SecurityPolicy => live.security_policies.items_mut().get_mut(at.index),
                _ => live.httproutes.items_mut().get_mut(at.index),
            }?;
            let left = uses.get_mut(&at).map(|n| {
                *n -= 1;
                *n
            });
            Some(match left {
                Some(0) => std::mem::take(slot),
                _ => slot.clone(),
            })
        })
        .collect()
}

/// Builds the plan. Errors when a requested change does not fit the live state.
///
/// The live routes it plans from are moved out of `live` and each is freed once its change is
/// planned, or held by it (an Ingress's change reads its views from the live object's parts): the
/// rest of `live` stays, and a route left there is `null`. A caller that needs them as read
/// keeps a copy.
pub fn build_plan(req: &UpdateRequest<'_>, live: &mut LiveState) -> Result<Plan, PlanError> {
    let mut objects = Vec::new();
    if req.container_update.image.is_some() {
        // The revision the run's record gets if no other run records first.
        let revision = live
            .history
            .as_ref()
            .and_then(|cm| History::sizes_of(cm.as_ref()).next_revision());
        let u = DeploymentUpdater {
            name: req.app.to_owned(),
            container: req.container.map(str::to_owned),
            update: req.container_update.clone(),
            cause: Some(ChangeCause {
                revision,
                undo_of: req.undo_of,
            }),
        };
        objects.push(planned(Updater::Deployment(u), |u| {
            u.plan(req.namespace, live.deployment.as_ref())
        })?);
    }
    if req.needs().autoscaler {
        let u = AutoscalerUpdater {
            name: req.app.to_owned(),
            update: req.autoscaler_update.clone(),
        };
        objects.push(planned(Updater::Autoscaler(u), |u| {
            u.plan(req.namespace, live.autoscaler.as_ref())
        })?);
    }
    let mut summary = None;
    if let Some(file) = req.endpoints {
        let service = live.service.as_ref().ok_or_else(|| PlanError::Missing {
            reference: format!("service/{}", req.app),
            namespace: req.namespace.to_owned(),
        })?;
        let live_routes = LiveRoutes {
            service,
            ingresses: &live.ingresses,
            httproutes: &live.httproutes,
            security_policies: &live.security_policies,
            ingress_classes: live.ingress_classes.as_deref(),
            gateway_support: live.gateway_support.as_ref(),
        };
        let planned_routes = routes::plan_routes(req.app, file, req.routes, &live_routes)?;
        let currents = given_up(live, &planned_routes.updaters);
        for ((updater, _), current) in planned_routes.updaters.into_iter().zip(currents) {
            objects.push(planned(updater, |u| u.plan_owned(req.namespace, current))?);
        }
        summary = Some(planned_routes.summary);
    }
    let plan = Plan::new(
        req.app.to_owned(),
        req.namespace.to_owned(),
        req.context.to_owned(),
        objects,
    );
    Ok(match summary {
        Some(s) => plan.with_routes(s),
        None => plan,
    })
}
