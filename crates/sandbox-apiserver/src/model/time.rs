//! RFC 3339 timestamps at second precision, as `metav1.Time` serialises them (the `time`
//! crate's RFC 3339 format).

use ::time::OffsetDateTime;
use ::time::format_description::well_known::Rfc3339;

/// Now, in unix seconds.
pub fn now_secs() -> i64 {
    OffsetDateTime::now_utc().unix_timestamp()
}

/// Now, as `metav1.Time` writes it.
pub fn now_rfc3339() -> String {
    format_rfc3339(now_secs())
}

/// `2026-11-30T11:48:25Z`.
pub fn format_rfc3339(secs: i64) -> String {
    OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

/// Parse `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` to unix seconds (the fraction dropped). The
/// date and time are separated by `T` (the `time` crate would take any character there; Go's
/// layout does not).
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    if !matches!(s.as_bytes().get(10), Some(b'T' | b't')) {
        return None;
    }
    OffsetDateTime::parse(s, &Rfc3339)
        .ok()
        .map(OffsetDateTime::unix_timestamp)
}

/// Now, as `metav1.MicroTime` writes it (`2026-11-30T11:48:25.123456Z`).
pub fn now_rfc3339_micro() -> String {
    let now = OffsetDateTime::now_utc();
    format_rfc3339_micro(now.unix_timestamp(), now.microsecond())
}

/// `2026-11-30T11:48:25.123456Z`: `metav1.MicroTime`'s layout (`RFC3339Micro`).
pub fn format_rfc3339_micro(secs: i64, micros: u32) -> String {
    let base = format_rfc3339(secs);
    match base.strip_suffix('Z') {
        Some(b) => format!("{b}.{micros:06}Z"),
        None => base,
    }
}

/// Parse an RFC 3339 time to unix seconds and microseconds (the rest of the fraction dropped).
pub fn parse_rfc3339_micro(s: &str) -> Option<(i64, u32)> {
    if !matches!(s.as_bytes().get(10), Some(b'T' | b't')) {
        return None;
    }
    OffsetDateTime::parse(s, &Rfc3339)
        .ok()
        .map(|t| (t.unix_timestamp(), t.microsecond()))
}

/// `time.Time.String()` of a UTC time: `2001-01-01 00:00:00 +0000 UTC` (how validation
/// messages print a `metav1.Time`).
pub fn go_string(rfc3339: &str) -> Option<String> {
    let t = OffsetDateTime::from_unix_timestamp(parse_rfc3339(rfc3339)?).ok()?;
    Some(format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02} +0000 UTC",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        assert_eq!(parse_rfc3339("2026-11-30T11:48:25Z"), Some(1_796_039_305));
        assert_eq!(format_rfc3339(1_796_039_305), "2026-11-30T11:48:25Z");
        assert_eq!(
            parse_rfc3339("2026-11-30T12:48:25.5+01:00"),
            Some(1_796_039_305)
        );
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("nope"), None);
        assert_eq!(
            parse_rfc3339_micro("2026-11-30T11:48:25.1234567Z")
                .map(|(s, us)| format_rfc3339_micro(s, us)),
            Some("2026-11-30T11:48:25.123456Z".to_string())
        );
    }
}
