//! Reads the application's live objects in one concurrent round: the Deployment (for an image
//! change), the HPA (for bounds), and for an endpoints change the Service (backend port), the
//! managed Ingresses, HTTPRoutes and Envoy Gateway SecurityPolicies (all
//! `app=<name>,identifier`; a cluster without the Gateway API or Envoy Gateway answers 404 for
//! HTTPRoutes or SecurityPolicies, which reads as "not served"). Only a first
//! exposure in an Ingress style without `--ingress-class` reads one thing more, in a second
//! round: the IngressClasses ([`read_ingress_classes`]). A run that changes the image and
//! records history also reads the history ConfigMap in that round: the change-cause annotation
//! names the revision the run's record is planned to get, and the run records against this
//! read instead of reading the ConfigMap again. A run that publishes scoped groups as Gateway
//! API HTTPRoutes reads the Gateways they attach to and their GatewayClasses, to check that the
//! cluster enforces the ExternalAuth filter ([`appupdate_plan::routes::external_auth`]): the Gateway
//! named by `--gateway` in the first round, one named only by the live routes in a second, and
//! the GatewayClasses after them ([`read_gateway_support`]). Returns plain data for the pure
//! planners.

use serde_json::Value;

use crate::error::AppError;
use appupdate_kube::cluster::{Cluster, RequestError};
use appupdate_kube::describe::Target;
use appupdate_model::plan::Kind;
use appupdate_plan::live::{LiveState, Needs};
use appupdate_plan::routes::external_auth::{GatewayKey, GatewaySupport, Read};
use appupdate_plan::routes::{Listing, managed_selector};

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
            Ok((Vec::new(), Vec::new()))
        }
    };
    let httproutes = async {
        if !needs.endpoints {
            return Ok((Listing::Items(Vec::new()), Vec::new()));
        }
        match cluster.list(Kind::HttpRoute, &managed_selector(app)).await {
            Ok((items, marks)) => Ok((Listing::Items(items), marks)),
            Err(e) if e.is_not_found() => Ok((Listing::NotServed, Vec::new())),
            Err(e) if e.status_code() == Some(403) && !needs.httproutes => {
                Ok((Listing::Forbidden, Vec::new()))
            }
            Err(e) => Err(e),
        }
    };
    let history = async {
        if needs.history {
            cluster
                .get_config_map(&appupdate_plan::history::config_map_name(app))
                .await
                .ok()
        } else {
            None
        }
    };
    let gateway = async {
        match &needs.gateway {
            Some(key) => read_gateway(cluster, key).await.map(Some),
            None => Ok(None),
        }
    };
    let policies = async {
        if !needs.endpoints {
            return Ok((Listing::Items(Vec::new()), Vec::new()));
        }
        match cluster
            .list(Kind::SecurityPolicy, &managed_selector(app))
            .await
        {
            Ok((items, marks)) => Ok((Listing::Items(items), marks)),
            Err(e) if e.is_not_found() => Ok((Listing::NotServed, Vec::new())),
            Err(e) if e.status_code() == Some(403) && !needs.security_policies => {
                Ok((Listing::Forbidden, Vec::new()))
            }
            Err(e) => Err(e),
        }
    };
    let (d, h, s, i, r, history, g, p) = tokio::join!(
        deployment, autoscaler, service, ingresses, httproutes, history, gateway, policies
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
    let g = g?;
    let p = p.map_err(|e| failure(cluster, e, "list", &Kind::SecurityPolicy.resource_name()))?;
    let ((i, mut marks), (r, route_marks), (p, policy_marks)) = (i, r, p);
    marks.extend(route_marks);
    marks.extend(policy_marks);
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
        history,
        gateway_support: g.map(|read| GatewaySupport {
            gateways: vec![read],
            classes: Vec::new(),
        }),
        marks,
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

/// What a GET gave for the ExternalAuth check: the object, or that it does not exist or may
/// not be read; any other failure fails the run, as every read does.
fn check_read(
    cluster: &Cluster,
    got: Result<Option<Value>, RequestError>,
    reference: &str,
) -> Result<Read, AppError> {
    match got {
        Ok(Some(v)) => Ok(Read::Found(v)),
        Ok(None) => Ok(Read::NotFound),
        Err(e) if e.status_code() == Some(403) => Ok(Read::Forbidden),
        Err(e) => {
            let mut f = failure(cluster, e, "get", reference);
            if let AppError::Request { target, .. } = &mut f {
                target.reference.push_str(
                    " (to check that it supports the ExternalAuth filter of the scoped routes)",
                );
            }
            Err(f)
        }
    }
}

async fn read_gateway(cluster: &Cluster, key: &GatewayKey) -> Result<(GatewayKey, Read), AppError> {
    let got = cluster.get_gateway(&key.namespace, &key.name).await;
    let reference = format!("gateway.gateway.networking.k8s.io/{}", key.name);
    Ok((key.clone(), check_read(cluster, got, &reference)?))
}

/// Completes `read` (what the first round read, if anything) for the ExternalAuth check: the
/// Gateways of `gateways` not read yet, concurrently, then the GatewayClasses they name, each
/// once, concurrently. A 403 or 404 is kept as such (the plan notes it); see
/// [`appupdate_plan::routes::external_auth`].
pub async fn read_gateway_support(
    cluster: &Cluster,
    gateways: &[GatewayKey],
    read: Option<GatewaySupport>,
) -> Result<GatewaySupport, AppError> {
    let mut support = read.unwrap_or_default();
    let missing: Vec<&GatewayKey> = gateways
        .iter()
        .filter(|k| !support.gateways.iter().any(|(read, _)| read == *k))
        .collect();
    let gateways_read =
        futures::future::join_all(missing.into_iter().map(|k| read_gateway(cluster, k))).await;
    for read in gateways_read {
        support.gateways.push(read?);
    }
    let classes = support.class_names();
    let classes_read = futures::future::join_all(classes.iter().map(|name| async move {
        let got = cluster.get_gateway_class(name).await;
        let reference = format!("gatewayclass.gateway.networking.k8s.io/{name}");
        check_read(cluster, got, &reference).map(|r| (name.clone(), r))
    }))
    .await;
    for read in classes_read {
        support.classes.push(read?);
    }
    Ok(support)
}
