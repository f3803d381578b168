//! The hand-written part of the report: what was changed for performance and why. Kept here so
//! that regenerating the report keeps it.

pub const NOTES: &str = "## Notes\n\n(to be written)\n";
