//! Time as plain numbers: a [`Timestamp`] is Unix milliseconds, passed in by the caller. This
//! module formats and parses RFC 3339 UTC and the CLI's durations; it never reads a clock.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Milliseconds since the Unix epoch, UTC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub fn plus_ms(self, ms: i64) -> Timestamp {
        Timestamp(self.0.saturating_add(ms))
    }
    pub fn ms_since(self, earlier: Timestamp) -> i64 {
        self.0 - earlier.0
    }
    /// RFC 3339 in UTC with second precision (`2026-12-02T10:33:15Z`), or with milliseconds when
    /// they are not zero.
    pub fn rfc3339(self) -> String {
        let secs = self.0.div_euclid(1000);
        let ms = self.0.rem_euclid(1000);
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        let (hh, mm, ss) = (rem / 3600, (rem % 3600) / 60, rem % 60);
        if ms == 0 {
            format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
        } else {
            format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{ms:03}Z")
        }
    }

    /// Parse RFC 3339 as Kubernetes writes it (`Z` or a `±hh:mm` offset, optional fraction).
    pub fn parse_rfc3339(s: &str) -> Option<Timestamp> {
        let b = s.as_bytes();
        if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
            return None;
        }
        let num = |r: std::ops::Range<usize>| -> Option<i64> {
            let t = s.get(r)?;
            if !t.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            t.parse().ok()
        };
        let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
        if b[13] != b':' || b[16] != b':' {
            return None;
        }
        let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
            return None;
        }
        let mut i = 19;
        let mut ms = 0i64;
        if b.get(i) == Some(&b'.') {
            i += 1;
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i == start {
                return None;
            }
            let frac = &s[start..i.min(start + 3)];
            ms = frac.parse::<i64>().ok()? * 10i64.pow(3 - frac.len() as u32);
        }
        let offset_s = match s.get(i..)? {
            "Z" | "z" => 0,
            rest if rest.len() == 6 && (rest.starts_with('+') || rest.starts_with('-')) => {
                let oh: i64 = rest.get(1..3)?.parse().ok()?;
                let om: i64 = rest.get(4..6)?.parse().ok()?;
                let v = oh * 3600 + om * 60;
                if rest.starts_with('-') { -v } else { v }
            }
            _ => return None,
        };
        let days = days_from_civil(y, mo, d);
        let secs = days * 86_400 + h * 3600 + mi * 60 + se - offset_s;
        Some(Timestamp(secs * 1000 + ms))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rfc3339())
    }
}

// Howard Hinnant's civil calendar algorithms (public domain arithmetic).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Parse a duration into milliseconds: the one grammar of every CLI duration flag and of the
/// trailer's `deadline`. A bare number is seconds (`90`); otherwise one or more
/// `<number><unit>` parts, spaces allowed between them (`1h30m`, `1h 30m`, `5 min`), where a number
/// may have a decimal fraction (`1.5s`, what [`human_duration`] prints) and the units are
/// `ms` (`msec`, `millis`, `millisecond(s)`), `s` (`sec(s)`, `second(s)`), `m` (`min(s)`,
/// `minute(s)`), `h` (`hr(s)`, `hour(s)`), `d` (`day(s)`) and `w` (`wk(s)`, `week(s)`).
/// Not accepted, on purpose: units below a millisecond (greenlight counts in milliseconds, so
/// they could only be rounded), and months or years (their length is a convention, and `M`
/// beside `m` invites a costly typo). The error names the text and what is accepted.
pub fn parse_duration_ms(text: &str) -> Result<i64, String> {
    let s = text.trim();
    let bad = |why: &str| {
        format!(
            "invalid duration {text:?}{why}: use seconds (`90`) or numbers with units, e.g. `500ms`, `1.5s`, `15m`, `1h30m`, `2d`"
        )
    };
    let overflow = || bad(" (too large)");
    if s.is_empty() {
        return Err(bad(""));
    }
    if s.bytes().all(|c| c.is_ascii_digit()) {
        return s
            .parse::<i64>()
            .ok()
            .and_then(|v| v.checked_mul(1000))
            .ok_or_else(overflow);
    }
    let mut total: i64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad(""));
        }
        let whole = &rest[..digits];
        rest = &rest[digits..];
        let mut fraction = "";
        if let Some(after_dot) = rest.strip_prefix('.') {
            let n = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            if n == 0 {
                return Err(bad(""));
            }
            fraction = &after_dot[..n];
            rest = &after_dot[n..];
        }
        rest = rest.trim_start();
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let factor: i64 = match &rest[..unit_len] {
            "ms" | "msec" | "msecs" | "millis" | "millisecond" | "milliseconds" => 1,
            "s" | "sec" | "secs" | "second" | "seconds" => 1000,
            "m" | "min" | "mins" | "minute" | "minutes" => 60_000,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3_600_000,
            "d" | "day" | "days" => 86_400_000,
            "w" | "wk" | "wks" | "week" | "weeks" => 604_800_000,
            _ => return Err(bad("")),
        };
        rest = rest[unit_len..].trim_start();
        let ms = part_ms(whole, fraction, factor).map_err(bad)?;
        total = total.checked_add(ms).ok_or_else(overflow)?;
    }
    Ok(total)
}

/// `<whole>.<fraction>` units of `factor` milliseconds each, or why that is no count of
/// milliseconds greenlight can hold.
fn part_ms(whole: &str, fraction: &str, factor: i64) -> Result<i64, &'static str> {
    const TOO_LARGE: &str = " (too large)";
    let whole: i64 = whole.parse().map_err(|_| TOO_LARGE)?;
    let ms = whole.checked_mul(factor).ok_or(TOO_LARGE)?;
    // Trailing zeros change nothing; past 18 digits the fraction would not fit in an i64.
    let fraction = fraction.trim_end_matches('0');
    if fraction.is_empty() {
        return Ok(ms);
    }
    if fraction.len() > 18 {
        return Err(" (too many decimals)");
    }
    let numerator =
        i128::from(fraction.parse::<i64>().map_err(|_| TOO_LARGE)?) * i128::from(factor);
    let denominator = 10i128.pow(fraction.len() as u32);
    if numerator % denominator != 0 {
        return Err(" (finer than a millisecond)");
    }
    let part = i64::try_from(numerator / denominator).map_err(|_| TOO_LARGE)?;
    ms.checked_add(part).ok_or(TOO_LARGE)
}

/// A duration in milliseconds written the way a person reads it: `900s`, `2m30s`, `1.5s`.
pub fn human_duration(ms: i64) -> String {
    if ms % 1000 != 0 {
        return format!("{:.1}s", ms as f64 / 1000.0);
    }
    format!("{}s", ms / 1000)
}

/// Read back what [`human_duration`] wrote (`900s`, `1.5s`): exact for whole seconds, to the
/// tenth of a second otherwise, as precise as the text.
pub fn parse_human_duration(text: &str) -> Option<i64> {
    let body = text.strip_suffix('s')?;
    let (whole, tenth) = match body.split_once('.') {
        Some((w, t)) if t.len() == 1 => (w, Some(t)),
        Some(_) => return None,
        None => (body, None),
    };
    let digits = whole.strip_prefix('-').unwrap_or(whole);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let secs: i64 = digits.parse().ok()?;
    let tenths: i64 = match tenth {
        Some(t) if t.bytes().all(|c| c.is_ascii_digit()) => t.parse().ok()?,
        Some(_) => return None,
        None => 0,
    };
    let ms = secs.checked_mul(1000)?.checked_add(tenths * 100)?;
    Some(if whole.starts_with('-') { -ms } else { ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trip() {
        for s in [
            "1970-01-01T00:00:00Z",
            "2026-12-02T10:33:15Z",
            "2000-02-29T23:59:59.250Z",
        ] {
            let t = Timestamp::parse_rfc3339(s).unwrap();
            assert_eq!(t.rfc3339(), s);
        }
        assert_eq!(
            Timestamp::parse_rfc3339("2026-12-02T12:33:15+02:00"),
            Timestamp::parse_rfc3339("2026-12-02T10:33:15Z")
        );
        assert_eq!(
            Timestamp::parse_rfc3339("2026-12-02T10:33:15Z").unwrap().0,
            1_796_207_595_000
        );
        assert!(Timestamp::parse_rfc3339("2026-13-02T10:33:15Z").is_none());
        assert!(Timestamp::parse_rfc3339("yesterday").is_none());
        assert!(Timestamp::parse_rfc3339("").is_none());
    }

    #[test]
    fn human_durations_read_back() {
        for ms in [0, 1000, 30_000, 900_000, 1500, 12_300] {
            assert_eq!(parse_human_duration(&human_duration(ms)), Some(ms), "{ms}");
        }
        // Written to the tenth of a second, read back as written.
        assert_eq!(parse_human_duration(&human_duration(12_345)), Some(12_300));
        for bad in ["", "s", "12", "1.25s", "a s", "1.s", "..5s"] {
            assert_eq!(parse_human_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("90"), Ok(90_000));
        assert_eq!(parse_duration_ms("90s"), Ok(90_000));
        assert_eq!(parse_duration_ms("15m"), Ok(900_000));
        assert_eq!(parse_duration_ms("2h"), Ok(7_200_000));
        assert_eq!(parse_duration_ms("500ms"), Ok(500));
        assert_eq!(parse_duration_ms("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration_ms(" 0 "), Ok(0));
        for bad in [
            "",
            "s",
            "15x",
            "-5",
            "99999999999999999999",
            "1.",
            ".5s",
            "1h30",
        ] {
            let err = parse_duration_ms(bad).unwrap_err();
            assert!(err.contains("invalid duration"), "{bad}: {err}");
        }
    }

    /// What the CLI's duration flags accepted before they shared this parser, through
    /// humantime: spaces between parts, long unit names, days and weeks, fractions.
    #[test]
    fn durations_in_the_spellings_people_use() {
        assert_eq!(parse_duration_ms("1h 30m"), Ok(5_400_000));
        assert_eq!(parse_duration_ms("2h 37min"), Ok(9_420_000));
        assert_eq!(parse_duration_ms("1m30s"), Ok(90_000));
        assert_eq!(parse_duration_ms("30sec"), Ok(30_000));
        assert_eq!(parse_duration_ms("5 minutes"), Ok(300_000));
        assert_eq!(parse_duration_ms("5minutes"), Ok(300_000));
        assert_eq!(parse_duration_ms("1hour 1second"), Ok(3_601_000));
        assert_eq!(parse_duration_ms("250msec"), Ok(250));
        assert_eq!(parse_duration_ms("2d"), Ok(172_800_000));
        assert_eq!(parse_duration_ms("1week"), Ok(604_800_000));
        assert_eq!(parse_duration_ms("1.5s"), Ok(1_500));
        assert_eq!(parse_duration_ms("0.25m"), Ok(15_000));
        assert_eq!(parse_duration_ms("2.5h"), Ok(9_000_000));
        assert_eq!(parse_duration_ms("1.0010s"), Ok(1_001));
        assert_eq!(parse_duration_ms("1.00000000000000000000s"), Ok(1_000));
    }

    #[test]
    fn durations_greenlight_cannot_count_are_refused() {
        for (bad, why) in [
            ("1.0005s", "finer than a millisecond"),
            ("0.5ms", "finer than a millisecond"),
            ("9999999999999999999ms", "too large"),
            ("99999999999w", "too large"),
            ("1.0000000000000000001s", "too many decimals"),
        ] {
            let err = parse_duration_ms(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
        for bad in ["500us", "10ns", "1M", "1y", "2months", "1S", "1H"] {
            let err = parse_duration_ms(bad).unwrap_err();
            assert!(err.contains("invalid duration"), "{bad}: {err}");
        }
    }
}
