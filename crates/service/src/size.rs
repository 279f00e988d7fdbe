//! Human sizes: parsing `512`, `4K`, `2G`, `1.5T` (binary multiples) into bytes,
//! and printing byte counts back in the largest exact or rounded unit.

use thiserror::Error;

/// Why a size string was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid size {text:?}: {reason} (expected a number with an optional K, M, G or T suffix, e.g. 2G)")]
pub struct SizeError {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Parses a size: digits (optionally with a fraction) and an optional binary
/// suffix `K`, `M`, `G`, `T` (case-insensitive, optionally followed by `iB` or
/// `B`). A fraction must give a whole number of bytes.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let refuse = |reason: &str| SizeError { text: text.to_owned(), reason: reason.to_owned() };
    let trimmed = text.trim();
    let number_end = trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(trimmed.len());
    let (number, suffix) = trimmed.split_at(number_end);
    if number.is_empty() {
        return Err(refuse("no number"));
    }
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(refuse("unknown suffix")),
    };
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) => (whole, fraction),
        None => (number, ""),
    };
    if fraction.contains('.') || (whole.is_empty() && fraction.is_empty()) {
        return Err(refuse("malformed number"));
    }
    let whole_value: u64 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| refuse("number too large"))? };
    let unit = 1u64 << shift;
    let mut bytes = whole_value.checked_mul(unit).ok_or_else(|| refuse("too large"))?;
    if !fraction.is_empty() {
        // fraction / 10^digits × unit must be a whole number of bytes.
        let digits = u32::try_from(fraction.len()).map_err(|_| refuse("too many digits"))?;
        let denominator = 10u128.checked_pow(digits).ok_or_else(|| refuse("too many digits"))?;
        let numerator: u128 = fraction.parse::<u128>().map_err(|_| refuse("too many digits"))? * u128::from(unit);
        if !numerator.is_multiple_of(denominator) {
            return Err(refuse("not a whole number of bytes"));
        }
        let extra = u64::try_from(numerator / denominator).map_err(|_| refuse("too large"))?;
        bytes = bytes.checked_add(extra).ok_or_else(|| refuse("too large"))?;
    }
    Ok(bytes)
}

/// Prints a byte count in binary units with up to one decimal (`2.0 GiB`, `512 B`).
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_are_binary_multiples() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert_eq!(parse_size("16MiB"), Ok(16 << 20));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size(" 8M "), Ok(8 << 20));
    }

    #[test]
    fn bad_sizes_are_refused_with_the_text() {
        for text in ["", "G", "2X", "1.2.3", "-1", "0.3", "99999999999999999999", "20000000T", "."] {
            let error = parse_size(text).expect_err(text);
            assert_eq!(error.text, text);
            assert!(error.to_string().contains("invalid size"), "{error}");
        }
    }

    #[test]
    fn sizes_print_in_the_largest_unit() {
        assert_eq!(format_size(512), "512 B");
        assert_eq!(format_size(2 << 30), "2.0 GiB");
        assert_eq!(format_size(1536), "1.5 KiB");
    }
}
