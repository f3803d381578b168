//! One change over several clusters (a fleet), end to end against several sandboxes at once:
//! one kubeconfig with a context per sandbox.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::fleet::*;
use common::*;

#[test]
fn identical_plans_are_folded_into_one_section_that_names_their_clusters() {
    let fleet = Fleet::new(&["eu-1", "eu-2", "us-1"]);
    fleet.set_image("us-1", "registry.example.com/web:1.1");
    let o = fleet.run(&[
        "web",
        "--contexts",
        "eu-1,eu-2,us-1",
        "--image",
        NEW_IMAGE,
        "--yes",
    ]);
    println!("{}\n----\n{}", stdout(&o), stderr(&o));
    assert_code(&o, 0);
}
