//! Reads the application's live objects in one concurrent round: the Deployment (for an image
//! change), the HPA (for bounds), and for an endpoints change the Service (backend port) and
//! the managed Ingresses (`app=<name>,identifier`). Returns plain data for the pure planners.

use serde_json::Value;

use crate::cluster::{Cluster, RequestError};
use crate::error::{AppError, Target};
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
    }
}

fn failure(cluster: &Cluster, err: RequestError, verb: &str, reference: String) -> AppError {
    AppError::Cluster(err.describe(verb, &target(cluster, reference)))
}

fn must_exist(
    cluster: &Cluster,
    v: Option<Value>,
    reference: String,
    why: &str,
) -> Result<Value, AppError> {
    v.ok_or_else(|| {
        AppError::Cluster(format!(
            "{reference} not found in namespace {:?} (context {:?}){why}; check the name and -n/--namespace",
            cluster.namespace(),
            cluster.conn.context
        ))
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

    let d = d.map_err(|e| {
        failure(
            cluster,
            e,
            "get",
            format!("{}/{app}", Kind::Deployment.kubectl_name()),
        )
    })?;
    let h = h.map_err(|e| {
        failure(
            cluster,
            e,
            "get",
            format!("{}/{app}", Kind::HorizontalPodAutoscaler.kubectl_name()),
        )
    })?;
    let s = s.map_err(|e| failure(cluster, e, "get", format!("service/{app}")))?;
    let i = i.map_err(|e| failure(cluster, e, "list", "ingresses.networking.k8s.io".to_owned()))?;

    let mut live = LiveState {
        ingresses: i,
        ..Default::default()
    };
    if let Some(d) = d {
        live.deployment = Some(must_exist(
            cluster,
            d,
            format!("{}/{app}", Kind::Deployment.kubectl_name()),
            "",
        )?);
    }
    if let Some(h) = h {
        live.autoscaler = Some(must_exist(
            cluster,
            h,
            format!("{}/{app}", Kind::HorizontalPodAutoscaler.kubectl_name()),
            "",
        )?);
    }
    if let Some(s) = s {
        live.service = Some(must_exist(
            cluster,
            s,
            format!("service/{app}"),
            " (the Ingress backend port is read from it)",
        )?);
    }
    Ok(live)
}
