//! Amounts as people read them. Providers send amounts in the currency's
//! minor unit (Stripe's `700` EUR is 7.00 EUR; JPY has no minor unit, so
//! `700` JPY is 700 JPY); how many decimals a currency has comes from ISO 4217
//! (`iso_currency`), never from a guess.

use serde_json::Value;

/// `amount` (minor units: an integer, or an integer written as a string)
/// in `currency` (an ISO 4217 code, any case) as `7.00 EUR`; `None` when
/// either is not that, so that the caller shows the raw values instead.
pub fn minor_units(amount: &Value, currency: &Value) -> Option<String> {
    let minor: i128 = match amount {
        Value::Number(n) => n.as_i64().map(i128::from)?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    let code = currency.as_str()?.trim().to_ascii_uppercase();
    let exponent = iso_currency::Currency::from_code(&code)?.exponent()?;
    Some(format!("{} {code}", decimal(minor, u32::from(exponent))))
}

/// `minor` with `exponent` decimals, grouped by thousands: `-1,234.50`.
fn decimal(minor: i128, exponent: u32) -> String {
    let scale = 10_i128.pow(exponent);
    let (whole, fraction) = (
        minor.unsigned_abs() / scale.unsigned_abs(),
        minor.unsigned_abs() % scale.unsigned_abs(),
    );
    let digits = whole.to_string();
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if minor < 0 {
        grouped.push('-');
    }
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    if exponent > 0 {
        grouped.push_str(&format!(".{fraction:0width$}", width = exponent as usize));
    }
    grouped
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_amount_in_minor_units_reads_with_its_currency_s_decimals() {
        assert_eq!(
            minor_units(&json!(700), &json!("EUR")).as_deref(),
            Some("7.00 EUR")
        );
        assert_eq!(
            minor_units(&json!(700), &json!("jpy")).as_deref(),
            Some("700 JPY")
        );
        assert_eq!(
            minor_units(&json!(1500), &json!("KWD")).as_deref(),
            Some("1.500 KWD")
        );
        assert_eq!(
            minor_units(&json!(5), &json!("usd")).as_deref(),
            Some("0.05 USD")
        );
        assert_eq!(
            minor_units(&json!(123_456_789), &json!("GBP")).as_deref(),
            Some("1,234,567.89 GBP")
        );
        assert_eq!(
            minor_units(&json!(-250), &json!("EUR")).as_deref(),
            Some("-2.50 EUR")
        );
        assert_eq!(
            minor_units(&json!("3600"), &json!("EUR")).as_deref(),
            Some("36.00 EUR")
        );
    }

    #[test]
    fn what_is_not_an_amount_in_a_known_currency_is_left_to_show_raw() {
        assert_eq!(minor_units(&json!(7.5), &json!("EUR")), None);
        assert_eq!(minor_units(&json!("7,00"), &json!("EUR")), None);
        assert_eq!(minor_units(&json!(700), &json!("EURO")), None);
        assert_eq!(minor_units(&json!(700), &json!(null)), None);
        // Gold has no minor unit in ISO 4217: not money to format.
        assert_eq!(minor_units(&json!(700), &json!("XAU")), None);
    }
}
