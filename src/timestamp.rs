//! Instants for `[bundle] expires` and the verifier's clock: one strict RFC 3339 spelling in,
//! exact comparison, canonical UTC text out.
//!
//! Written by hand rather than with a date-time crate: the format accepts every RFC 3339
//! date-time whose instant falls in the years 0000–9999 in UTC (the form it is written back
//! in), and the crates at hand cannot represent the
//! ends of that range as instants (`jiff::Timestamp` stops at 9999-12-30T22:00:00Z, so
//! `9999-12-31T23:59:59Z`, a natural "never", would be refused). What is needed is small and
//! well known: the Gregorian calendar rules and the days-from-civil conversion
//! (H. Hinnant, "chrono-Compatible Low-Level Date Algorithms").

use std::fmt;

/// An instant: seconds since 1970-01-01T00:00:00Z (negative before) and nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    seconds: i64,
    nanos: u32,
}

impl Timestamp {
    /// The system clock.
    pub fn now() -> Timestamp {
        match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => Timestamp { seconds: d.as_secs() as i64, nanos: d.subsec_nanos() },
            // A clock before 1970 is broken; it is still an instant.
            Err(e) => {
                let d = e.duration();
                Timestamp { seconds: -(d.as_secs() as i64) - 1, nanos: 1_000_000_000 - d.subsec_nanos() }.normalized()
            }
        }
    }

    pub fn from_unix(seconds: i64, nanos: u32) -> Timestamp {
        Timestamp { seconds, nanos: 0 }.plus_nanos(nanos)
    }

    pub fn unix_seconds(self) -> i64 {
        self.seconds
    }

    /// `self` plus `seconds`, if the result is still a timestamp this module can write and
    /// read back (years 0000–9999).
    pub fn checked_add_seconds(self, seconds: i64) -> Option<Timestamp> {
        let t = Timestamp { seconds: self.seconds.checked_add(seconds)?, nanos: self.nanos };
        Timestamp::parse(&t.to_string()).ok().filter(|back| *back == t)
    }

    fn plus_nanos(self, nanos: u32) -> Timestamp {
        Timestamp { seconds: self.seconds, nanos: self.nanos + nanos }.normalized()
    }

    fn normalized(self) -> Timestamp {
        Timestamp { seconds: self.seconds + i64::from(self.nanos / 1_000_000_000), nanos: self.nanos % 1_000_000_000 }
    }

    /// Parses an RFC 3339 date-time with an explicit offset, in its one strict spelling:
    /// `YYYY-MM-DDTHH:MM:SS[.F](Z|+HH:MM|-HH:MM)` with uppercase `T` and `Z`, 1–9 fraction
    /// digits, a real calendar date, hours 00–23, seconds 00–60 (a leap second counts as the
    /// last second of its minute, :59.999999999) and offsets within ±23:59. RFC 3339 also
    /// allows lowercase letters and a space for `T`; a signed field gets one spelling so that
    /// every verifier reads it alike.
    pub fn parse(text: &str) -> Result<Timestamp, String> {
        let bad = || format!("`{text}` is not an RFC 3339 date-time with an offset, e.g. \"2027-01-01T00:00:00Z\"");
        let b = text.as_bytes();
        let num = |from: usize, len: usize| -> Option<i64> {
            let s = b.get(from..from + len)?;
            s.iter().all(u8::is_ascii_digit).then(|| s.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0')))
        };
        let at = |i: usize, c: u8| b.get(i) == Some(&c);
        if !(at(4, b'-') && at(7, b'-') && at(10, b'T') && at(13, b':') && at(16, b':')) {
            return Err(bad());
        }
        let fields = (num(0, 4), num(5, 2), num(8, 2), num(11, 2), num(14, 2), num(17, 2));
        let (Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second)) = fields else {
            return Err(bad());
        };
        let mut i = 19;
        let mut nanos = 0u32;
        if at(i, b'.') {
            let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if !(1..=9).contains(&digits) {
                return Err(bad());
            }
            let fraction = num(i + 1, digits).ok_or_else(bad)?;
            nanos = (fraction * 10i64.pow(9 - digits as u32)) as u32;
            i += 1 + digits;
        }
        let offset_minutes = match &b[i.min(b.len())..] {
            b"Z" => 0,
            [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
                let (Some(h), Some(m)) = (num(i + 1, 2), num(i + 4, 2)) else { return Err(bad()) };
                if h > 23 || m > 59 {
                    return Err(bad());
                }
                if *sign == b'-' { -(h * 60 + m) } else { h * 60 + m }
            }
            _ => return Err(bad()),
        };
        if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
            return Err(format!("`{text}` is not a date of the Gregorian calendar"));
        }
        if hour > 23 || minute > 59 || second > 60 {
            return Err(format!("`{text}` is not a time of day"));
        }
        // A leap second is inserted at the end of a UTC day only: 23:59:60 once the offset is
        // taken away (00:59:60+01:00 is one, 12:30:60Z is not).
        if second == 60 && (hour * 60 + minute - offset_minutes).rem_euclid(24 * 60) != 23 * 60 + 59 {
            return Err(format!("`{text}` is not a time of day (a leap second is 23:59:60 in UTC)"));
        }
        let (second, nanos) = if second == 60 { (59, 999_999_999) } else { (second, nanos) };
        let local = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
        let seconds = local - offset_minutes * 60;
        // The instant must have a UTC spelling with a four-digit year, which is how it is
        // written back (`pack --expires` signs the UTC form): 9999-12-31T23:59:59-23:59 is in
        // the year 10000 in UTC, which no verifier could read.
        if seconds < days_from_civil(0, 1, 1) * 86_400 || seconds >= days_from_civil(10_000, 1, 1) * 86_400 {
            return Err(format!("`{text}` is outside the years 0000-9999 once converted to UTC"));
        }
        Ok(Timestamp { seconds, nanos })
    }
}

/// A span of time as `<N><unit>` with unit `s`, `m`, `h`, `d` or `w` (`90d`, `12h`), in seconds.
pub fn parse_span(text: &str) -> Result<i64, String> {
    let bad = || format!("`{text}` is not a span of time such as `90d`, `12h` or `2w` (units: s, m, h, d, w)");
    let unit = match text.chars().last() {
        Some('s') => 1,
        Some('m') => 60,
        Some('h') => 3600,
        Some('d') => 86_400,
        Some('w') => 7 * 86_400,
        _ => return Err(bad()),
    };
    let digits = &text[..text.len() - 1];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: i64 = digits.parse().map_err(|_| bad())?;
    n.checked_mul(unit).filter(|s| *s > 0).ok_or_else(bad)
}

impl std::str::FromStr for Timestamp {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Timestamp::parse(s)
    }
}

/// Canonical UTC: `YYYY-MM-DDTHH:MM:SSZ`, with the fraction only when there is one.
impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.seconds.div_euclid(86_400);
        let secs = self.seconds.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        write!(f, "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)?;
        if self.nanos != 0 {
            let fraction = format!("{:09}", self.nanos);
            write!(f, ".{}", fraction.trim_end_matches('0'))?;
        }
        f.write_str("Z")
    }
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        Timestamp::parse(s).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn converts_exactly() {
        assert_eq!(t("1970-01-01T00:00:00Z").unix_seconds(), 0);
        assert_eq!(t("2027-01-01T00:00:00Z").unix_seconds(), 1_798_761_600);
        assert_eq!(t("2000-02-29T12:00:00Z").unix_seconds(), 951_825_600);
        assert_eq!(t("1969-12-31T23:59:59Z").unix_seconds(), -1);
        assert_eq!(t("2027-01-01T02:00:00+02:00"), t("2027-01-01T00:00:00Z"));
        assert_eq!(t("2026-12-31T19:30:00-04:30"), t("2027-01-01T00:00:00Z"));
        assert_eq!(t("2027-01-01T00:00:00-00:00"), t("2027-01-01T00:00:00Z"));
        assert!(t("2027-01-01T00:00:00.000000001Z") > t("2027-01-01T00:00:00Z"));
        assert!(t("2016-12-31T23:59:60Z") < t("2017-01-01T00:00:00Z"));
        assert!(t("2016-12-31T23:59:60Z") > t("2016-12-31T23:59:59.5Z"));
        assert!(t("9999-12-31T23:59:59Z") > t("9999-12-30T22:00:00Z"));
        assert!(t("0000-01-01T23:59:00+23:59") == t("0000-01-01T00:00:00Z"));
        // Every day of four centuries round-trips through the text.
        let mut day = t("1900-01-01T00:00:00Z");
        for _ in 0..146_097 {
            assert_eq!(t(&day.to_string()), day);
            day = Timestamp::from_unix(day.unix_seconds() + 86_400, 0);
        }
        assert_eq!(day, t("2300-01-01T00:00:00Z"));
        assert_eq!(t("2027-01-01T02:00:00.250+02:00").to_string(), "2027-01-01T00:00:00.25Z");
        assert_eq!(t("9999-12-31T00:00:59-23:59").to_string(), "9999-12-31T23:59:59Z");
        assert_eq!(t("2016-12-31T19:59:60-04:00"), t("2016-12-31T23:59:60Z"));
    }

    #[test]
    fn one_strict_spelling() {
        for bad in [
            "2027-01-01",
            "2027-01-01T00:00:00",
            "2027-01-01t00:00:00z",
            "2027-01-01T00:00:00z",
            "2027-01-01 00:00:00Z",
            "2027-02-29T00:00:00Z",
            "2100-02-29T00:00:00Z",
            "2027-04-31T00:00:00Z",
            "2027-13-01T00:00:00Z",
            "2027-00-01T00:00:00Z",
            "2027-01-00T00:00:00Z",
            "2027-01-01T24:00:00Z",
            "2027-01-01T00:60:00Z",
            "2027-01-01T00:00:61Z",
            "2027-01-01T00:00:00+24:00",
            "2027-01-01T00:00:00+01:60",
            "2027-01-01T00:00:00+0100",
            "2027-01-01T00:00:00+01",
            "2027-01-01T00:00:00.Z",
            "2027-01-01T00:00:00.1234567890Z",
            "+2027-01-01T00:00:00Z",
            "12027-01-01T00:00:00Z",
            "2027-01-01T00:00:00Z ",
            " 2027-01-01T00:00:00Z",
            "2027-1-01T00:00:00Z",
            "２０２７-01-01T00:00:00Z",
            "2027-01-01T00:00:00ZZ",
            // Leap seconds only at 23:59:60 UTC.
            "2027-01-01T12:30:60Z",
            "2016-12-31T23:59:60+01:00",
            // Instants whose UTC spelling would not have four digits.
            "9999-12-31T23:59:59-23:59",
            "0000-01-01T00:00:00+00:01",
            "",
        ] {
            assert!(Timestamp::parse(bad).is_err(), "{bad} accepted");
        }
        assert!(Timestamp::parse("2024-02-29T00:00:00Z").is_ok());
        assert!(Timestamp::parse("2000-02-29T00:00:00Z").is_ok());
    }
}
