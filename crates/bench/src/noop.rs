//! The floor of the benchmark's start-up measure: a Rust program that starts and exits, built
//! with the plugin's release profile. The plugin's own start-up is what it takes beyond this.

fn main() {}
