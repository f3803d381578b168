//! `resource.Quantity` parsing and canonical serialisation, as k8s.io/apimachinery does it:
//! `0.5` → `500m`, `1024Mi` → `1Gi`, `1500m` stays, `2000` → `2k`, values below 1n round up.

pub const PARSE_ERROR: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

#[derive(Clone, Copy, PartialEq, Debug)]
enum Format {
    DecimalSi,
    BinarySi,
    DecimalExponent,
}

/// The canonical string for a quantity, or `None` when it does not parse.
pub fn canonical(s: &str) -> Option<String> {
    let (negative, mut mantissa, mut exp10, format) = parse(s)?;
    // Round up (away from zero) to nano precision, like Quantity does.
    if exp10 < -9 {
        let shift = (-9 - exp10) as u32;
        let div = 10i128.checked_pow(shift)?;
        let rounded = mantissa / div + i128::from(mantissa % div != 0);
        mantissa = rounded;
        exp10 = -9;
    }
    if mantissa == 0 {
        return Some("0".into());
    }
    let sign = if negative { "-" } else { "" };
    while exp10 < 0 && mantissa % 10 == 0 {
        mantissa /= 10;
        exp10 += 1;
    }
    if format == Format::BinarySi {
        // Binary only for integers of magnitude >= 1024.
        if exp10 >= 0 {
            let value = mantissa.checked_mul(10i128.checked_pow(exp10 as u32)?)?;
            if value >= 1024 {
                let suffixes = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
                let mut v = value;
                let mut k = 0;
                while k < 6 && v % 1024 == 0 {
                    v /= 1024;
                    k += 1;
                }
                return Some(format!("{sign}{v}{}", suffixes[k]));
            }
        }
    }
    // Decimal: strip trailing zeros into the exponent, then bring it down to a multiple of 3.
    while mantissa % 10 == 0 {
        mantissa /= 10;
        exp10 += 1;
    }
    let r = exp10.rem_euclid(3);
    mantissa = mantissa.checked_mul(10i128.pow(r as u32))?;
    exp10 -= r;
    if format == Format::DecimalExponent {
        if exp10 == 0 {
            return Some(format!("{sign}{mantissa}"));
        }
        return Some(format!("{sign}{mantissa}e{exp10}"));
    }
    let (mantissa, exp10) = if exp10 > 18 {
        (
            mantissa.checked_mul(10i128.checked_pow((exp10 - 18) as u32)?)?,
            18,
        )
    } else {
        (mantissa, exp10)
    };
    let suffix = match exp10 {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        0 => "",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => return None,
    };
    Some(format!("{sign}{mantissa}{suffix}"))
}

/// The numeric value of a quantity (for comparisons only).
pub fn to_f64(s: &str) -> Option<f64> {
    let (negative, mantissa, exp10, _) = parse(s)?;
    let v = mantissa as f64 * 10f64.powi(exp10);
    Some(if negative { -v } else { v })
}

/// (negative, mantissa, exponent of ten, format)
fn parse(s: &str) -> Option<(bool, i128, i32, Format)> {
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut negative = false;
    if let Some(&c) = bytes.first()
        && (c == b'+' || c == b'-')
    {
        negative = c == b'-';
        i = 1;
    }
    let num_start = i;
    while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
        i += 1;
    }
    let number = &s[num_start..i];
    if number.is_empty() || number.matches('.').count() > 1 || number == "." {
        return None;
    }
    let suffix = &s[i..];
    let (int_part, frac_part) = match number.split_once('.') {
        Some((a, b)) => (a, b),
        None => (number, ""),
    };
    let digits: String = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    let mut mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let mut exp10 = -(frac_part.len() as i32);
    let format = match suffix {
        "" => Format::DecimalSi,
        "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E" => {
            exp10 += match suffix {
                "n" => -9,
                "u" => -6,
                "m" => -3,
                "k" => 3,
                "M" => 6,
                "G" => 9,
                "T" => 12,
                "P" => 15,
                _ => 18,
            };
            Format::DecimalSi
        }
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
            let power = match suffix {
                "Ki" => 1,
                "Mi" => 2,
                "Gi" => 3,
                "Ti" => 4,
                "Pi" => 5,
                _ => 6,
            };
            mantissa = mantissa.checked_mul(1024i128.checked_pow(power)?)?;
            Format::BinarySi
        }
        _ => {
            let rest = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))?;
            let e: i32 = rest.parse().ok()?;
            if !rest
                .chars()
                .all(|c| c.is_ascii_digit() || c == '-' || c == '+')
            {
                return None;
            }
            exp10 += e;
            Format::DecimalExponent
        }
    };
    if !(-40..=40).contains(&exp10) {
        return None;
    }
    Some((negative, mantissa, exp10, format))
}

#[cfg(test)]
mod tests {
    use super::canonical;

    #[test]
    fn canonical_forms_match_apimachinery() {
        for (input, want) in [
            ("0.5", "500m"),
            ("500m", "500m"),
            ("1000m", "1"),
            ("1.5", "1500m"),
            ("2000", "2k"),
            ("1200", "1200"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("100Mi", "100Mi"),
            ("1Ki", "1Ki"),
            ("0", "0"),
            ("1e3", "1e3"),
            ("128974848", "128974848"),
            ("129e6", "129e6"),
            ("123Mi", "123Mi"),
            ("0.1", "100m"),
            ("1n", "1n"),
            ("0.0000000001", "1n"),
            ("-1", "-1"),
        ] {
            assert_eq!(canonical(input).as_deref(), Some(want), "{input}");
        }
        for bad in ["", "abc", "1.2.3", "1Zi", "--1", "1 "] {
            assert_eq!(canonical(bad), None, "{bad}");
        }
    }
}
