//! The integration tests, one binary: each module is what used to be a test binary of its own
//! (`tests/<name>.rs`), so a change to the plugin links one test binary instead of thirty.
//! Run one module with `cargo nextest run --test it <module>::`, e.g. `--test it fuzz::`.
//! `tests/compact_memory.rs` stays a binary of its own: it installs dhat's counting allocator
//! as the global allocator, which would count (and slow) every other test.

mod common;

mod adopted_routes_e2e;
mod applied_once_e2e;
mod approved_plans_e2e;
mod auth_provider_e2e;
mod bad_input_corpus;
mod external_auth_e2e;
mod fault_matrix_e2e;
mod files_e2e;
mod fleet_e2e;
mod fleet_limits_e2e;
mod fleet_props;
mod fuzz;
mod history_e2e;
mod image_data_e2e;
mod image_e2e;
mod image_pinned_e2e;
mod image_sign_e2e;
mod image_token_e2e;
mod impersonation_e2e;
mod ingress_e2e;
mod ingress_races_e2e;
mod injection;
mod interrupt_e2e;
mod kuberc_e2e;
mod owners_e2e;
mod prompt_pty;
mod proxy_e2e;
mod racing_writers_e2e;
mod rollout_failures_e2e;
mod route_planner_props;
mod routes_e2e;
mod secrets_e2e;
mod signed_plans_e2e;
mod terminal_escapes_e2e;
mod transport_e2e;
mod transport_http1_e2e;
mod trust_e2e;
mod update_e2e;
mod url_credentials_e2e;
mod ux_color;
mod ux_completion;
mod ux_output;
mod ux_release;
mod ux_streams;
mod ux_wait;
mod verify_url_e2e;
mod wait_routes_e2e;
