//! The application's live objects as the server returned them, and which of them a run
//! needs: plain data, read by the shell (`live_state` in the plugin) and planned from here.

use serde_json::Value;

use crate::routes::Listing;
use crate::routes::external_auth::{GatewayKey, GatewaySupport};

/// Which objects the requested changes need.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    pub deployment: bool,
    pub autoscaler: bool,
    pub endpoints: bool,
    /// The run publishes HTTPRoutes (`--routes gateway`): a forbidden HTTPRoute list is then
    /// the run's failure, not "none visible".
    pub httproutes: bool,
    /// The history ConfigMap (an image change in a run that records history).
    pub history: bool,
    /// `--routes gateway --gateway` with scoped groups: the Gateway, read in the first round
    /// for the ExternalAuth check.
    pub gateway: Option<GatewayKey>,
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
    /// The history ConfigMap (`Some(None)`: there is none), when it was needed and read. A
    /// failed read leaves `None` and does not fail the run: recording reads it again and says
    /// why it cannot, as it does when the ConfigMap was not read here.
    pub history: Option<Option<Value>>,
    /// The Gateways of scoped HTTPRoutes and their GatewayClasses, when they were read.
    pub gateway_support: Option<GatewaySupport>,
    /// Who else may own the listed Ingresses, HTTPRoutes and SecurityPolicies: the marks of
    /// each one that names another possible owner, kept from the listing (which drops their
    /// managedFields), so that the plan's owners are found after the routes are planned and
    /// freed ([`appupdate_model::owners::Marks`]).
    pub marks: Vec<appupdate_model::owners::Marked>,
}
