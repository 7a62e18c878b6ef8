//! Human byte sizes in and out (`--ram 16GiB`, profile files, reports).
//!
//! Units follow IEC/SI strictly, because guessing "G means GiB" silently
//! shifts a budget by 7 %: `K`/`KB`, `M`/`MB`, `G`/`GB`, `T`/`TB` are powers of
//! 10; `KiB`, `MiB`, `GiB`, `TiB` (or the Kubernetes-style `Ki`, `Mi`, `Gi`,
//! `Ti`) are powers of 2; a bare number or `B` is bytes. Units are
//! case-insensitive, a space between number and unit is allowed, and
//! fractions such as `1.5GiB` are rounded to the nearest byte.

use super::HwError;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TIB: u64 = 1 << 40;

/// Parses a byte size such as `"2GiB"`, `"512MiB"`, `"8G"` (= 8·10⁹),
/// `"1.5GiB"` or `"4096"` (bytes). See the module docs for the unit table.
///
/// # Errors
/// [`HwError::InvalidSize`], a one-line message quoting the input.
pub fn parse_size(s: &str) -> Result<u64, HwError> {
    let err = |reason: &str| HwError::InvalidSize {
        input: s.to_string(),
        reason: reason.to_string(),
    };
    let text = s.trim();
    if text.is_empty() {
        return Err(err(
            "empty; expected a number with an optional unit such as 512MiB, 8GB or 1.5GiB",
        ));
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    if number.is_empty() {
        return Err(err(
            "expected a number with an optional unit such as 512MiB, 8GB or 1.5GiB",
        ));
    }
    let multiplier = unit_multiplier(unit.trim()).ok_or_else(|| {
        err("unknown unit; use B, KB/MB/GB/TB (powers of 1000) or KiB/MiB/GiB/TiB (powers of 1024)")
    })?;

    if !number.contains('.') {
        let n: u128 = number
            .parse()
            .map_err(|_| err("the number does not parse"))?;
        let bytes = n
            .checked_mul(u128::from(multiplier))
            .and_then(|b| u64::try_from(b).ok())
            .ok_or_else(|| err("too large (over 16 EiB)"))?;
        return Ok(bytes);
    }
    let value: f64 = number
        .parse()
        .map_err(|_| err("the number does not parse"))?;
    if multiplier == 1 && value.fract() != 0.0 {
        return Err(err("a size in bytes must be a whole number"));
    }
    let bytes = (value * multiplier as f64).round();
    // u64::MAX as f64 rounds up to 2^64, so `<` (not `<=`) keeps the cast exact.
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(err("too large (over 16 EiB)"));
    }
    Ok(bytes as u64)
}

/// Bytes per unit, or `None` when the unit is not one we accept.
fn unit_multiplier(unit: &str) -> Option<u64> {
    let m = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "t" | "tb" => 1_000_000_000_000,
        "ki" | "kib" => KIB,
        "mi" | "mib" => MIB,
        "gi" | "gib" => GIB,
        "ti" | "tib" => TIB,
        _ => return None,
    };
    Some(m)
}

/// Formats bytes with binary units and two decimals: `"1.50 GiB"`,
/// `"512.00 MiB"`; below 1 KiB the exact count: `"512 B"`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < KIB {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / KIB as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_unit_table() {
        let cases: &[(&str, u64)] = &[
            ("0", 0),
            ("4096", 4096),
            ("4096B", 4096),
            ("1k", 1_000),
            ("1KiB", 1024),
            ("512MiB", 512 * MIB),
            ("512 MiB", 512 * MIB),
            ("512mib", 512 * MIB),
            ("2GiB", 2 * GIB),
            ("2Gi", 2 * GIB),
            ("8G", 8_000_000_000),
            ("8GB", 8_000_000_000),
            ("1.5GiB", 3 * GIB / 2),
            ("0.5 TiB", TIB / 2),
            ("80GB", 80_000_000_000),
            ("1.6TB", 1_600_000_000_000),
            (" 3 MB ", 3_000_000),
            ("18446744073709551615", u64::MAX),
        ];
        for (input, want) in cases {
            assert_eq!(parse_size(input).ok(), Some(*want), "input {input:?}");
        }
    }

    #[test]
    fn rejects_bad_input_with_one_line_quoting_it() {
        for input in [
            "",
            "GiB",
            "abc",
            "12XB",
            "1.5",
            "-3GiB",
            "1.2.3GiB",
            "99999999999TiB",
            "16383PiB",
        ] {
            let e = parse_size(input).expect_err(input).to_string();
            assert!(e.contains(&format!("\"{input}\"")), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn formats_with_two_decimals() {
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(1023), "1023 B");
        assert_eq!(format_size(1024), "1.00 KiB");
        assert_eq!(format_size(3 * GIB / 2), "1.50 GiB");
        assert_eq!(format_size(512 * MIB), "512.00 MiB");
        assert_eq!(format_size(80_000_000_000), "74.51 GiB");
        assert_eq!(format_size(u64::MAX), "16.00 EiB");
    }

    #[test]
    fn format_then_parse_is_close() {
        for bytes in [5 * MIB + 123, 7 * GIB + 999_999, 3 * TIB] {
            let back = parse_size(&format_size(bytes).replace(' ', "")).expect("own output parses");
            let err = back.abs_diff(bytes) as f64 / bytes as f64;
            assert!(err < 0.005, "{bytes} -> {back}");
        }
    }
}
