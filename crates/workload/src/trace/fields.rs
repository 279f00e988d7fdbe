//! Field parsing shared by the trace formats: exact decimal times, integers in
//! decimal or hex, one-letter operations, and the error that names the field.

use crate::request::Operation;

/// Nanoseconds per second.
pub const NANOS_PER_SECOND: u64 = 1_000_000_000;
/// Nanoseconds per millisecond.
pub const NANOS_PER_MILLISECOND: u64 = 1_000_000;
/// Nanoseconds per microsecond.
pub const NANOS_PER_MICROSECOND: u64 = 1_000;

/// What is wrong with one field of a line; the reader adds the file and line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field's name as the format's definition calls it.
    pub field: &'static str,
    /// What is wrong with it.
    pub message: String,
}

impl FieldError {
    /// An error in `field`.
    pub fn new(field: &'static str, message: impl Into<String>) -> FieldError {
        FieldError { field, message: message.into() }
    }
}

/// The `index`-th field, or an error saying how many the line has.
pub fn field<'a>(fields: &[&'a str], index: usize, name: &'static str) -> Result<&'a str, FieldError> {
    fields.get(index).copied().ok_or_else(|| {
        FieldError::new(name, format!("missing: the line has {} fields, this is field {}", fields.len(), index + 1))
    })
}

/// A non-negative decimal integer.
pub fn unsigned(text: &str, name: &'static str) -> Result<u64, FieldError> {
    text.trim().parse::<u64>().map_err(|_| FieldError::new(name, format!("`{text}` is not a non-negative integer")))
}

/// A read or a write spelled as one letter, `R` or `W`, in either case.
pub fn letter_operation(text: &str, name: &'static str) -> Result<Operation, FieldError> {
    match text {
        "R" | "r" => Ok(Operation::Read),
        "W" | "w" => Ok(Operation::Write),
        other => Err(FieldError::new(name, format!("`{other}` is neither R nor W"))),
    }
}

/// A non-negative integer in hex, with or without `0x` (DiskSim's flags).
pub fn hexadecimal(text: &str, name: &'static str) -> Result<u64, FieldError> {
    let trimmed = text.trim();
    let digits = trimmed.strip_prefix("0x").or_else(|| trimmed.strip_prefix("0X")).unwrap_or(trimmed);
    u64::from_str_radix(digits, 16).map_err(|_| FieldError::new(name, format!("`{text}` is not a hex integer")))
}

/// A non-negative decimal number of `unit_ns`-nanosecond units (seconds,
/// milliseconds, ...), converted to nanoseconds exactly: the integer and
/// fraction digits are read as integers, and digits finer than a nanosecond
/// are rounded half up. Exponent notation (`1.5e3`) is accepted through a
/// float, as some tools print it.
pub fn decimal_time_ns(text: &str, unit_ns: u64, name: &'static str) -> Result<u64, FieldError> {
    let trimmed = text.trim();
    let bad = || FieldError::new(name, format!("`{text}` is not a non-negative decimal number"));
    let out_of_range = || FieldError::new(name, format!("`{text}` is too large"));
    if trimmed.contains(['e', 'E']) {
        let value: f64 = trimmed.parse().map_err(|_| bad())?;
        if !value.is_finite() || value < 0.0 {
            return Err(bad());
        }
        let nanos = value * unit_ns as f64;
        return if nanos < u64::MAX as f64 { Ok(nanos.round() as u64) } else { Err(out_of_range()) };
    }
    let (integer_text, fraction_text) = trimmed.split_once('.').unwrap_or((trimmed, ""));
    let integer_text = integer_text.strip_prefix('+').unwrap_or(integer_text);
    let all_digits = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
    if (integer_text.is_empty() && fraction_text.is_empty()) || !all_digits(integer_text) || !all_digits(fraction_text)
    {
        return Err(bad());
    }
    let integer: u64 = if integer_text.is_empty() { 0 } else { integer_text.parse().map_err(|_| out_of_range())? };
    let whole_ns = integer.checked_mul(unit_ns).ok_or_else(out_of_range)?;
    whole_ns.checked_add(fraction_ns(fraction_text, unit_ns)).ok_or_else(out_of_range)
}

/// The nanoseconds of a fraction of one `unit_ns` unit, rounded half up.
fn fraction_ns(digits: &str, unit_ns: u64) -> u64 {
    // Accumulate digit by digit in u128: value = digits / 10^len units.
    let mut numerator: u128 = 0;
    let mut denominator: u128 = 1;
    for byte in digits.bytes().take(30) {
        numerator = numerator * 10 + u128::from(byte - b'0');
        denominator *= 10;
    }
    let scaled = numerator * u128::from(unit_ns);
    ((scaled + denominator / 2) / denominator) as u64
}

/// Splits a comma-separated line into trimmed fields.
pub fn comma_fields(line: &str) -> Vec<&str> {
    line.split(',').map(str::trim).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_times_are_exact() {
        assert_eq!(decimal_time_ns("1456095145.133076000", NANOS_PER_SECOND, "t").unwrap(), 1_456_095_145_133_076_000);
        assert_eq!(decimal_time_ns("13.191135", NANOS_PER_MILLISECOND, "t").unwrap(), 13_191_135);
        assert_eq!(decimal_time_ns("0.0000000015", NANOS_PER_SECOND, "t").unwrap(), 2, "rounded half up");
        assert_eq!(decimal_time_ns(".5", NANOS_PER_SECOND, "t").unwrap(), 500_000_000);
        assert_eq!(decimal_time_ns("7", NANOS_PER_MILLISECOND, "t").unwrap(), 7_000_000);
        assert_eq!(decimal_time_ns("1.5e3", NANOS_PER_MILLISECOND, "t").unwrap(), 1_500_000_000);
    }

    #[test]
    fn malformed_times_name_the_field() {
        for text in ["", ".", "-1", "1.2.3", "abc", "1,5", "99999999999999999999"] {
            let error = decimal_time_ns(text, NANOS_PER_SECOND, "Timestamp").unwrap_err();
            assert_eq!(error.field, "Timestamp", "{text}");
        }
    }

    #[test]
    fn integers_in_decimal_and_hex() {
        assert_eq!(unsigned("42", "n").unwrap(), 42);
        assert!(unsigned("-1", "n").is_err());
        assert_eq!(hexadecimal("0x11", "flags").unwrap(), 17);
        assert_eq!(hexadecimal("1", "flags").unwrap(), 1);
        assert!(hexadecimal("zz", "flags").is_err());
    }
}
