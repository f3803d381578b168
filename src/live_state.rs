//! Reads the application's live objects in one concurrent round: the Deployment (for an image
//! change), the HPA (for bounds), and for an endpoints change the Service (backend port), the
//! managed Ingresses, HTTPRoutes and Envoy Gateway SecurityPolicies (all
//! `app=<name>,identifier`; a cluster without the Gateway API or Envoy Gateway answers 404 for
//! HTTPRoutes or SecurityPolicies, which reads as "not served"). Only a first
//! exposure in an Ingress style without `--ingress-class` reads one thing more, in a second
//! round: the IngressClasses ([`read_ingress_classes`]). Returns plain data for the pure
//! planners.

use serde_json::Value;

use crate::cluster::{Cluster, RequestError};
use crate::describe::Target;
use crate::error::AppError;
use crate::plan::Kind;
use crate::routes::{Listing, managed_selector};

/// Which objects the requested changes need.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    pub deployment: bool,
    pub autoscaler: bool,
    pub endpoints: bool,
    /// The run publishes HTTPRoutes (`--routes gateway`): a forbidden HTTPRoute list is then
    /// the run's failure, not "none visible".
    pub httproutes: bool,
    /// The run guards HTTPRoutes with SecurityPolicies (`--auth-provider envoy-gateway`): a
    /// forbidden SecurityPolicy list is then the run's failure.
    pub security_policies: bool,
}

/// The live objects, as the server returned them.
#[derive(Clone, Debug, Default)]
pub struct LiveState {
    pub deployment: Option<Value>,
    pub autoscaler: Option<Value>,
    pub service: Option<Value>,
    /// Ingresses carrying both `app=<name>` and the identifier label.
    pub ingresses: Vec<Value>,
    /// HTTPRoutes carrying both labels, or why there are none to see.
    pub httproutes: Listing,
    /// SecurityPolicies carrying both labels, or why there are none to see.
    pub security_policies: Listing,
    /// The cluster's IngressClasses, when they were read.
    pub ingress_classes: Option<Vec<Value>>,
}

/// Label selector of the routes this tool manages for `app`.
pub fn managed_ingress_selector(app: &str) -> String {
    managed_selector(app)
}

fn target(cluster: &Cluster, reference: String) -> Target {
    Target {
        reference,
        namespace: cluster.namespace().to_owned(),
        context: cluster.conn.context.clone(),
        as_user: cluster.conn.as_user.clone(),
    }
}

fn failure(
    cluster: &Cluster,
    source: RequestError,
    verb: &'static str,
    reference: &str,
) -> AppError {
    AppError::Request {
        verb,
        target: target(cluster, reference.to_owned()),
        source: Box::new(source),
    }
}

fn must_exist(
    cluster: &Cluster,
    v: Option<Value>,
    reference: &str,
    why: &'static str,
) -> Result<Value, AppError> {
    v.ok_or_else(|| AppError::NotFound {
        target: target(cluster, reference.to_owned()),
        why,
    })
}

/// Reads everything `needs` asks for, concurrently. A missing required object is an error.
pub async fn read(cluster: &Cluster, app: &str, needs: Needs) -> Result<LiveState, AppError> {
    let deployment = async {
        if needs.deployment {
            cluster.get(Kind::Deployment, app).await.map(Some)
        } else {
            Ok(None)
        }
    };
    let autoscaler = async {
        if needs.autoscaler {
            cluster
                .get(Kind::HorizontalPodAutoscaler, app)
                .await
                .map(Some)
        } else {
            Ok(None)
        }
    };
    let service = async {
        if needs.endpoints {
            cluster.get_service(app).await.map(Some)
        } else {
            Ok(None)
        }
    };
    let ingresses = async {
        if needs.endpoints {
            cluster.list(Kind::Ingress, &managed_selector(app)).await
        } else {
            Ok(Vec::new())
        }
    };
    let httproutes = async {
        if !needs.endpoints {
            return Ok(Listing::Items(Vec::new()));
        }
        match cluster.list(Kind::HttpRoute, &managed_selector(app)).await {
            Ok(items) => Ok(Listing::Items(items)),
            Err(e) if e.is_not_found() => Ok(Listing::NotServed),
            Err(e) if e.status_code() == Some(403) && !needs.httproutes => Ok(Listing::Forbidden),
            Err(e) => Err(e),
        }
    };
    let policies = async {
        if !needs.endpoints {
            return Ok(Listing::Items(Vec::new()));
        }
        match cluster
            .list(Kind::SecurityPolicy, &managed_selector(app))
            .await
        {
            Ok(items) => Ok(Listing::Items(items)),
            Err(e) if e.is_not_found() => Ok(Listing::NotServed),
            Err(e) if e.status_code() == Some(403) && !needs.security_policies => {
                Ok(Listing::Forbidden)
            }
            Err(e) => Err(e),
        }
    };
    let (d, h, s, i, r, p) = tokio::join!(
        deployment, autoscaler, service, ingresses, httproutes, policies
    );

    let deployment_ref = format!("{}/{app}", Kind::Deployment.kubectl_name());
    let autoscaler_ref = format!("{}/{app}", Kind::HorizontalPodAutoscaler.kubectl_name());
    let service_ref = format!("service/{app}");
    // Transport and API errors first, then objects that were needed but are missing.
    let d = d.map_err(|e| failure(cluster, e, "get", &deployment_ref))?;
    let h = h.map_err(|e| failure(cluster, e, "get", &autoscaler_ref))?;
    let s = s.map_err(|e| failure(cluster, e, "get", &service_ref))?;
    let i = i.map_err(|e| failure(cluster, e, "list", &Kind::Ingress.resource_name()))?;
    let r = r.map_err(|e| failure(cluster, e, "list", &Kind::HttpRoute.resource_name()))?;
    let p = p.map_err(|e| failure(cluster, e, "list", &Kind::SecurityPolicy.resource_name()))?;
    // `None`: not needed; `Some(None)`: needed and not found.
    let required = |read: Option<Option<Value>>, reference: &str, why: &'static str| {
        read.map(|found| must_exist(cluster, found, reference, why))
            .transpose()
    };
    Ok(LiveState {
        deployment: required(d, &deployment_ref, "")?,
        autoscaler: required(h, &autoscaler_ref, "")?,
        service: required(
            s,
            &service_ref,
            " (the routes' backend port is read from it)",
        )?,
        ingresses: i,
        httproutes: r,
        security_policies: p,
        ingress_classes: None,
    })
}

/// Reads the cluster's IngressClasses (cluster-scoped): one request, made only when a first
/// exposure has to find the default class.
pub async fn read_ingress_classes(cluster: &Cluster) -> Result<Vec<Value>, AppError> {
    cluster.list_ingress_classes().await.map_err(|e| {
        let mut f = failure(cluster, e, "list", "ingressclasses.networking.k8s.io");
        if let AppError::Request { target, .. } = &mut f {
            target.reference.push_str(
                " (to find the default class for new Ingresses; or name one with --ingress-class)",
            );
        }
        f
    })
}
