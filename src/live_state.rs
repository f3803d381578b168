//! Reads the application's live objects in one concurrent round: the Deployment (for an image
//! change), the HPA (for bounds), and for an endpoints change the Service (backend port) and
//! the managed Ingresses (`app=<name>,identifier`). Returns plain data for the pure planners.

use serde_json::Value;

use crate::cluster::{Cluster, RequestError};
use crate::describe::Target;
use crate::error::AppError;
use crate::plan::Kind;

/// Which objects the requested changes need.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    pub deployment: bool,
    pub autoscaler: bool,
    pub endpoints: bool,
}

/// The live objects, as the server returned them.
#[derive(Clone, Debug, Default)]
pub struct LiveState {
    pub deployment: Option<Value>,
    pub autoscaler: Option<Value>,
    pub service: Option<Value>,
    /// Ingresses carrying both `app=<name>` and the identifier label.
    pub ingresses: Vec<Value>,
}

/// Label selector of the Ingresses this tool manages for `app`.
pub fn managed_ingress_selector(app: &str) -> String {
    format!("app={app},{}", crate::ingress_planner::IDENTIFIER_LABEL)
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
            cluster
                .list(Kind::Ingress, &managed_ingress_selector(app))
                .await
        } else {
            Ok(Vec::new())
        }
    };
    let (d, h, s, i) = tokio::join!(deployment, autoscaler, service, ingresses);

    let deployment_ref = format!("{}/{app}", Kind::Deployment.kubectl_name());
    let autoscaler_ref = format!("{}/{app}", Kind::HorizontalPodAutoscaler.kubectl_name());
    let service_ref = format!("service/{app}");
    // Transport and API errors first, then objects that were needed but are missing.
    let d = d.map_err(|e| failure(cluster, e, "get", &deployment_ref))?;
    let h = h.map_err(|e| failure(cluster, e, "get", &autoscaler_ref))?;
    let s = s.map_err(|e| failure(cluster, e, "get", &service_ref))?;
    let i = i.map_err(|e| failure(cluster, e, "list", "ingresses.networking.k8s.io"))?;
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
            " (the Ingress backend port is read from it)",
        )?,
        ingresses: i,
    })
}
