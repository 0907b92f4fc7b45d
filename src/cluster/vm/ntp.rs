//! The guests' time server: a minimal SNTP server (RFC 4330) on the bridge address, answering
//! with this machine's clock, so that the guests' time daemon has a source to restore their
//! clocks from after the clock nemesis moved them, as a cloud VM's daemon has its provider's.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;

/// Seconds from the NTP era (1900-01-01) to the Unix epoch.
const NTP_UNIX_OFFSET: u64 = 2_208_988_800;

/// The stratum the server claims: an undisciplined local clock, as chrony's `local stratum`.
const STRATUM: u8 = 10;

/// Answers NTP client requests on `addr` with this machine's clock until the process is
/// killed.
pub fn serve(addr: SocketAddr) -> anyhow::Result<()> {
    let socket = UdpSocket::bind(addr).with_context(|| format!("cannot listen on {addr}/udp"))?;
    let mut request = [0u8; 512];
    loop {
        let (len, peer) = socket.recv_from(&mut request)?;
        let received = SystemTime::now();
        if let Some(reply) = answer(&request[..len], received, SystemTime::now()) {
            // A reply lost is a request the client sends again.
            let _ = socket.send_to(&reply, peer);
        }
    }
}

/// The server's reply to `request` (received at `received`, sent at `now`), or `None` when it
/// is not a client request.
fn answer(request: &[u8], received: SystemTime, now: SystemTime) -> Option<[u8; 48]> {
    if request.len() < 48 {
        return None;
    }
    let version = (request[0] >> 3) & 0b111;
    let mode = request[0] & 0b111;
    if mode != 3 || !(1..=4).contains(&version) {
        return None;
    }
    let mut reply = [0u8; 48];
    // No leap warning, the client's version, server mode.
    reply[0] = (version << 3) | 4;
    reply[1] = STRATUM;
    // The client's poll interval.
    reply[2] = request[2];
    // Precision about a microsecond (2^-20 s); root delay 0; root dispersion 1/64 s (16.16
    // fixed point).
    reply[3] = (-20i8) as u8;
    reply[8..12].copy_from_slice(&(1u32 << 10).to_be_bytes());
    reply[12..16].copy_from_slice(b"LOCL");
    let reference = now.checked_sub(Duration::from_secs(1)).unwrap_or(now);
    reply[16..24].copy_from_slice(&timestamp(reference).to_be_bytes());
    reply[24..32].copy_from_slice(&request[40..48]); // origin: the client's transmit time
    reply[32..40].copy_from_slice(&timestamp(received).to_be_bytes());
    reply[40..48].copy_from_slice(&timestamp(now).to_be_bytes());
    Some(reply)
}

/// `t` as an NTP timestamp: seconds since 1900 in the high 32 bits, the fraction in the low.
fn timestamp(t: SystemTime) -> u64 {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = (since.as_secs() + NTP_UNIX_OFFSET) & 0xffff_ffff;
    let fraction = (u64::from(since.subsec_nanos()) << 32) / 1_000_000_000;
    (seconds << 32) | fraction
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(first: u8) -> [u8; 48] {
        let mut r = [0u8; 48];
        r[0] = first;
        r[2] = 6;
        r[40..48].copy_from_slice(&0x1122_3344_5566_7788u64.to_be_bytes());
        r
    }

    #[test]
    fn a_client_request_gets_the_server_clock_and_its_own_transmit_time_back() {
        let received = UNIX_EPOCH + Duration::new(1_700_000_000, 500_000_000);
        let sent = received + Duration::from_millis(1);
        let reply = answer(&request(0b00_100_011), received, sent).unwrap();
        assert_eq!(
            reply[0], 0b00_100_100,
            "no leap warning, version 4, server mode"
        );
        assert_eq!((reply[1], reply[2]), (STRATUM, 6));
        assert_eq!(&reply[24..32], &0x1122_3344_5566_7788u64.to_be_bytes());
        let at = |i: usize| u64::from_be_bytes(reply[i..i + 8].try_into().unwrap());
        assert_eq!(at(32) >> 32, 1_700_000_000 + NTP_UNIX_OFFSET);
        assert_eq!(at(32) & 0xffff_ffff, 1 << 31, "half a second");
        assert!(at(40) > at(32) && at(16) < at(32));
    }

    #[test]
    fn what_is_not_a_client_request_gets_no_answer() {
        let now = SystemTime::now();
        assert!(
            answer(&request(0b00_100_100), now, now).is_none(),
            "a server reply"
        );
        assert!(
            answer(&request(0b00_000_011), now, now).is_none(),
            "version 0"
        );
        assert!(answer(&[0b00_100_011; 20], now, now).is_none(), "too short");
    }
}
