//! Go Crush's session hash ids: the XXH3 (64-bit, seed 0) hash of a session's UUID, as 16 hex
//! digits. Go Crush prints them (`session list`, its exit hint `crush -s <hash>`) and accepts
//! any prefix of them back; so does crush (crush(1) SESSION STORE).

const PRIME32_1: u64 = 0x9E37_79B1;
const PRIME32_2: u64 = 0x85EB_CA77;
const PRIME32_3: u64 = 0xC2B2_AE3D;
const PRIME64_1: u64 = 0x9E37_79B1_85EB_CA87;
const PRIME64_2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const PRIME64_3: u64 = 0x1656_67B1_9E37_79F9;
const PRIME64_4: u64 = 0x85EB_CA77_C2B2_AE63;
const PRIME64_5: u64 = 0x27D4_EB2F_1656_67C5;
const PRIME_MX1: u64 = 0x1656_6791_9E37_79F9;
const PRIME_MX2: u64 = 0x9FB2_1C65_1E98_DF25;

/// XXH3's default secret.
const SECRET: [u8; 192] = [
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
];

fn r64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn r32(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u64::from(u32::from_le_bytes(a))
}

fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

fn avalanche(mut h: u64) -> u64 {
    h ^= h >> 37;
    h = h.wrapping_mul(PRIME_MX1);
    h ^ (h >> 32)
}

fn xxh64_avalanche(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(PRIME64_2);
    h ^= h >> 29;
    h = h.wrapping_mul(PRIME64_3);
    h ^ (h >> 32)
}

fn rrmxmx(mut h: u64, len: u64) -> u64 {
    h ^= h.rotate_left(49) ^ h.rotate_left(24);
    h = h.wrapping_mul(PRIME_MX2);
    h ^= (h >> 35).wrapping_add(len);
    h = h.wrapping_mul(PRIME_MX2);
    h ^ (h >> 28)
}

fn mix16(input: &[u8], at: usize, s: usize) -> u64 {
    fold(
        r64(input, at) ^ r64(&SECRET, s),
        r64(input, at + 8) ^ r64(&SECRET, s + 8),
    )
}

fn accumulate_stripe(acc: &mut [u64; 8], input: &[u8], at: usize, s: usize) {
    for i in 0..8 {
        let v = r64(input, at + 8 * i);
        let k = v ^ r64(&SECRET, s + 8 * i);
        acc[i ^ 1] = acc[i ^ 1].wrapping_add(v);
        acc[i] = acc[i].wrapping_add((k & 0xFFFF_FFFF).wrapping_mul(k >> 32));
    }
}

fn long(input: &[u8]) -> u64 {
    const STRIPE: usize = 64;
    const STRIPES_PER_BLOCK: usize = (SECRET.len() - STRIPE) / 8;
    const BLOCK: usize = STRIPE * STRIPES_PER_BLOCK;
    let len = input.len();
    let mut acc = [
        PRIME32_3, PRIME64_1, PRIME64_2, PRIME64_3, PRIME64_4, PRIME32_2, PRIME64_5, PRIME32_1,
    ];
    let blocks = (len - 1) / BLOCK;
    for b in 0..blocks {
        for n in 0..STRIPES_PER_BLOCK {
            accumulate_stripe(&mut acc, input, b * BLOCK + n * STRIPE, n * 8);
        }
        for (i, a) in acc.iter_mut().enumerate() {
            let mut x = *a;
            x ^= x >> 47;
            x ^= r64(&SECRET, SECRET.len() - STRIPE + 8 * i);
            *a = x.wrapping_mul(PRIME32_1);
        }
    }
    let stripes = ((len - 1) - BLOCK * blocks) / STRIPE;
    for n in 0..stripes {
        accumulate_stripe(&mut acc, input, blocks * BLOCK + n * STRIPE, n * 8);
    }
    accumulate_stripe(&mut acc, input, len - STRIPE, SECRET.len() - STRIPE - 7);
    let mut h = (len as u64).wrapping_mul(PRIME64_1);
    for i in 0..4 {
        h = h.wrapping_add(fold(
            acc[2 * i] ^ r64(&SECRET, 11 + 16 * i),
            acc[2 * i + 1] ^ r64(&SECRET, 11 + 16 * i + 8),
        ));
    }
    avalanche(h)
}

/// XXH3 64-bit with seed 0 and the default secret.
pub(crate) fn xxh3_64(input: &[u8]) -> u64 {
    let len = input.len();
    let n = len as u64;
    match len {
        0 => xxh64_avalanche(r64(&SECRET, 56) ^ r64(&SECRET, 64)),
        1..=3 => {
            let combined = (u64::from(input[0]) << 16)
                | (u64::from(input[len >> 1]) << 24)
                | u64::from(input[len - 1])
                | (n << 8);
            xxh64_avalanche(combined ^ (r32(&SECRET, 0) ^ r32(&SECRET, 4)))
        }
        4..=8 => {
            let both = r32(input, len - 4).wrapping_add(r32(input, 0) << 32);
            rrmxmx(both ^ (r64(&SECRET, 8) ^ r64(&SECRET, 16)), n)
        }
        9..=16 => {
            let lo = r64(input, 0) ^ (r64(&SECRET, 24) ^ r64(&SECRET, 32));
            let hi = r64(input, len - 8) ^ (r64(&SECRET, 40) ^ r64(&SECRET, 48));
            avalanche(
                n.wrapping_add(lo.swap_bytes())
                    .wrapping_add(hi)
                    .wrapping_add(fold(lo, hi)),
            )
        }
        17..=128 => {
            let mut acc = n.wrapping_mul(PRIME64_1);
            let pairs: &[(usize, usize)] = match len {
                97.. => &[(48, 96), (32, 64), (16, 32), (0, 0)],
                65.. => &[(32, 64), (16, 32), (0, 0)],
                33.. => &[(16, 32), (0, 0)],
                _ => &[(0, 0)],
            };
            for &(at, s) in pairs {
                acc = acc.wrapping_add(mix16(input, at, s));
                acc = acc.wrapping_add(mix16(input, len - at - 16, s + 16));
            }
            avalanche(acc)
        }
        129..=240 => {
            let mut acc = n.wrapping_mul(PRIME64_1);
            for i in 0..8 {
                acc = acc.wrapping_add(mix16(input, 16 * i, 16 * i));
            }
            acc = avalanche(acc);
            for i in 8..len / 16 {
                acc = acc.wrapping_add(mix16(input, 16 * i, 16 * (i - 8) + 3));
            }
            acc = acc.wrapping_add(mix16(input, len - 16, 136 - 17));
            avalanche(acc)
        }
        _ => long(input),
    }
}

/// Go Crush's hash id of a session: XXH3 of its id, 16 hex digits.
pub(crate) fn hash_id(session_id: &str) -> String {
    format!("{:016x}", xxh3_64(session_id.as_bytes()))
}

/// Characters of a hash id shown in lists, as Go Crush shows them; any unique prefix is accepted
/// back.
pub(crate) const SHORT: usize = 7;

/// How Go Crush names a session in lists and in its `crush -s` hint: the first characters of
/// its hash id.
pub(crate) fn short_id(session_id: &str) -> String {
    hash_id(session_id)[..SHORT].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values from the reference implementation (libxxhash 0.8.1), one per length class.
    #[test]
    fn matches_the_reference_implementation() {
        let data: Vec<u8> = (0..2000u32).map(|i| (i * 7 + 3) as u8).collect();
        for (len, want) in [
            (0usize, 0x2d06_8005_38d3_94c2u64),
            (1, 0x13e6_08bc_156d_efed),
            (3, 0xa908_8dda_485b_481c),
            (4, 0x6d92_53b1_6c8b_1ed3),
            (8, 0x6053_9db6_3047_1163),
            (9, 0xfeff_6683_61d7_23a8),
            (16, 0xb8c8_59b0_f030_b585),
            (17, 0x714a_0440_8e79_b80f),
            (36, 0xdd6c_3c86_3f06_3ab7),
            (64, 0x287e_b1fa_9e4b_e2c1),
            (65, 0x8292_18de_4d79_8646),
            (100, 0xb593_7857_f0d7_8c9f),
            (128, 0x6742_5a03_6502_61bf),
            (129, 0xc664_bf33_11c6_abc4),
            (240, 0x6455_6dc6_b462_a6cf),
            (241, 0x8bea_dd3a_8874_fe17),
            (1024, 0x9b81_661c_641c_72b1),
            (1025, 0x806c_2072_ed71_3576),
            (2000, 0x71f8_268c_6d85_6c4a),
        ] {
            assert_eq!(xxh3_64(&data[..len]), want, "length {len}");
        }
    }

    #[test]
    fn hash_ids_are_sixteen_hex_digits() {
        assert_eq!(
            hash_id("5c1a2e21-187c-42a3-83ea-91086401001f"),
            "8647e2a631f89b8f"
        );
    }
}
