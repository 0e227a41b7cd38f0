//! Redis's geohash, bit for bit: a longitude and latitude become a 52-bit
//! integer (26 bits of each, interleaved, latitude limited to Web
//! Mercator's ±85.05112878), the score of the member in the sorted set
//! that holds a GEO key. A search covers its area with the cell of the
//! centre and its eight neighbours at a precision chosen from the radius,
//! each cell one range of scores. Distances are haversine on Redis's
//! earth radius. Ported from Redis's `geohash.c` and `geohash_helper.c`
//! (BSD), so that scores, GEOHASH strings and search results agree.

pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
/// Bits of each coordinate in a score.
pub const STEP_MAX: u8 = 26;

const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;

/// A cell: `step` bits of each coordinate, interleaved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hash {
    pub bits: u64,
    pub step: u8,
}

impl Hash {
    fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }
}

/// A rectangle of coordinates: longitudes and latitudes, min and max.
#[derive(Clone, Copy, Debug, Default)]
pub struct Area {
    pub lon: (f64, f64),
    pub lat: (f64, f64),
}

/// What a search covers: around `center` (longitude, latitude), a radius
/// or a box (width, height), in meters.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    Radius(f64),
    Box(f64, f64),
}

fn interleave64(xlo: u32, ylo: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let (mut x, mut y) = (xlo as u64, ylo as u64);
    for i in (0..5).rev() {
        x = (x | (x << S[i])) & B[i];
        y = (y | (y << S[i])) & B[i];
    }
    x | (y << 1)
}

fn deinterleave64(interleaved: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
        0x00000000FFFFFFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let (mut x, mut y) = (interleaved, interleaved >> 1);
    for i in 0..6 {
        x = (x | (x >> S[i])) & B[i];
        y = (y | (y >> S[i])) & B[i];
    }
    x | (y << 32)
}

/// `lon`, `lat` as a cell of `step` bits in the ranges given; `None`
/// outside them.
pub fn encode_in(
    lon_range: (f64, f64),
    lat_range: (f64, f64),
    lon: f64,
    lat: f64,
    step: u8,
) -> Option<Hash> {
    if !(LONG_MIN..=LONG_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_range.0 || lat > lat_range.1 || lon < lon_range.0 || lon > lon_range.1 {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_offset = (lat - lat_range.0) / (lat_range.1 - lat_range.0) * scale;
    let lon_offset = (lon - lon_range.0) / (lon_range.1 - lon_range.0) * scale;
    Some(Hash {
        bits: interleave64(lat_offset as u32, lon_offset as u32),
        step,
    })
}

/// `lon`, `lat` as a cell of `step` bits of the GEO ranges.
pub fn encode(lon: f64, lat: f64, step: u8) -> Option<Hash> {
    encode_in((LONG_MIN, LONG_MAX), (LAT_MIN, LAT_MAX), lon, lat, step)
}

/// The rectangle of cell `h`.
pub fn decode(h: Hash) -> Area {
    let sep = deinterleave64(h.bits);
    let (ilat, ilon) = (sep as u32 as f64, (sep >> 32) as u32 as f64);
    let cells = (1u64 << h.step) as f64;
    let (lat_scale, lon_scale) = (LAT_MAX - LAT_MIN, LONG_MAX - LONG_MIN);
    Area {
        lat: (
            LAT_MIN + ilat / cells * lat_scale,
            LAT_MIN + (ilat + 1.0) / cells * lat_scale,
        ),
        lon: (
            LONG_MIN + ilon / cells * lon_scale,
            LONG_MIN + (ilon + 1.0) / cells * lon_scale,
        ),
    }
}

/// The longitude and latitude a score stands for: its cell's centre.
pub fn decode_score(score: f64) -> (f64, f64) {
    let a = decode(Hash {
        bits: score as u64,
        step: STEP_MAX,
    });
    let lon = ((a.lon.0 + a.lon.1) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((a.lat.0 + a.lat.1) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// A cell's hash aligned to 52 bits: the score of its first point.
pub fn align52(h: Hash) -> u64 {
    h.bits << (52 - h.step as u32 * 2)
}

/// The score of a point (`None` outside the GEO ranges).
pub fn score_of(lon: f64, lat: f64) -> Option<u64> {
    encode(lon, lat, STEP_MAX).map(align52)
}

/// Moves the coordinate in the bits of `mask` (odd bits: longitude,
/// even: latitude) one cell up (`d` > 0) or down, wrapping around.
fn step_bits(h: &mut Hash, d: i8, mask: u64) {
    if d == 0 {
        return;
    }
    let mut moving = h.bits & mask;
    let kept = h.bits & !mask;
    let shift = 64 - h.step as u32 * 2;
    // The other coordinate's bits, set: a carry runs through them.
    let zz = !mask >> shift;
    if d > 0 {
        moving = moving.wrapping_add(zz + 1);
    } else {
        moving |= zz;
        moving = moving.wrapping_sub(zz + 1);
    }
    moving &= mask >> shift;
    h.bits = moving | kept;
}

fn move_x(h: &mut Hash, d: i8) {
    step_bits(h, d, 0xaaaaaaaaaaaaaaaa);
}

fn move_y(h: &mut Hash, d: i8) {
    step_bits(h, d, 0x5555555555555555);
}

/// The cell moved by `dx` east and `dy` north.
fn moved(h: Hash, dx: i8, dy: i8) -> Hash {
    let mut n = h;
    move_x(&mut n, dx);
    move_y(&mut n, dy);
    n
}

fn deg_rad(d: f64) -> f64 {
    d * (std::f64::consts::PI / 180.0)
}

fn rad_deg(r: f64) -> f64 {
    r / (std::f64::consts::PI / 180.0)
}

/// The precision of the cells that cover a search of `range` meters.
fn steps_by_radius(mut range: f64, lat: f64) -> u8 {
    if range == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// The bounding box of `shape` around `center`.
fn bounding_box(center: (f64, f64), shape: Shape) -> Area {
    let (lon, lat) = center;
    let (height, width) = match shape {
        Shape::Radius(r) => (r, r),
        Shape::Box(w, h) => (h / 2.0, w / 2.0),
    };
    let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
    let lon_delta_top = rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(lat + lat_delta).cos());
    let lon_delta_bottom = rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(lat - lat_delta).cos());
    let delta = if lat < 0.0 {
        lon_delta_bottom
    } else {
        lon_delta_top
    };
    Area {
        lon: (lon - delta, lon + delta),
        lat: (lat - lat_delta, lat + lat_delta),
    }
}

/// The cells whose points a search of `shape` around `center` must look
/// at: the centre's cell first, then its neighbours (north, south, east,
/// west, north-east, north-west, south-east, south-west), those the area
/// cannot reach left out.
pub fn cells(center: (f64, f64), shape: Shape) -> Vec<Hash> {
    let b = bounding_box(center, shape);
    let radius = match shape {
        Shape::Radius(r) => r,
        Shape::Box(w, h) => ((w / 2.0) * (w / 2.0) + (h / 2.0) * (h / 2.0)).sqrt(),
    };
    let (lon, lat) = center;
    let mut steps = steps_by_radius(radius, lat);
    let mut hash = encode(lon, lat, steps).unwrap_or_default();
    let near = |h: Hash| {
        let n = decode(moved(h, 0, 1));
        let s = decode(moved(h, 0, -1));
        let e = decode(moved(h, 1, 0));
        let w = decode(moved(h, -1, 0));
        n.lat.1 < b.lat.1 || s.lat.0 > b.lat.0 || e.lon.1 < b.lon.1 || w.lon.0 > b.lon.0
    };
    if steps > 1 && near(hash) {
        steps -= 1;
        hash = encode(lon, lat, steps).unwrap_or_default();
    }
    let area = decode(hash);
    let zero = Hash::default();
    // north, south, east, west, north-east, north-west, south-east, south-west
    let mut around = [
        moved(hash, 0, 1),
        moved(hash, 0, -1),
        moved(hash, 1, 0),
        moved(hash, -1, 0),
        moved(hash, 1, 1),
        moved(hash, -1, 1),
        moved(hash, 1, -1),
        moved(hash, -1, -1),
    ];
    if steps >= 2 {
        if area.lat.0 < b.lat.0 {
            for i in [1, 6, 7] {
                around[i] = zero;
            }
        }
        if area.lat.1 > b.lat.1 {
            for i in [0, 4, 5] {
                around[i] = zero;
            }
        }
        if area.lon.0 < b.lon.0 {
            for i in [3, 7, 5] {
                around[i] = zero;
            }
        }
        if area.lon.1 > b.lon.1 {
            for i in [2, 6, 4] {
                around[i] = zero;
            }
        }
    }
    let mut out = vec![hash];
    out.extend(around);
    out
}

/// The scores of the points of cell `h`: from (included) and to (excluded).
pub fn score_range(h: Hash) -> Option<(u64, u64)> {
    if h.is_zero() {
        return None;
    }
    let next = Hash {
        bits: h.bits + 1,
        step: h.step,
    };
    Some((align52(h), align52(next)))
}

fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// The distance in meters between two points (longitude, latitude).
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let (lon1r, lon2r) = (deg_rad(lon1), deg_rad(lon2));
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

/// The distance from `center` to `point` if the point is inside `shape`.
pub fn within(center: (f64, f64), shape: Shape, point: (f64, f64)) -> Option<f64> {
    let ((x1, y1), (x2, y2)) = (center, point);
    match shape {
        Shape::Radius(r) => {
            let d = distance(x1, y1, x2, y2);
            (d <= r).then_some(d)
        }
        Shape::Box(w, h) => {
            if lat_distance(y2, y1) > h / 2.0 || distance(x2, y2, x1, y2) > w / 2.0 {
                return None;
            }
            Some(distance(x1, y1, x2, y2))
        }
    }
}

/// GEOHASH's 11 characters: the point re-encoded on the standard ranges
/// (latitude ±90), the last character always `0` (52 bits only).
pub fn standard_hash(lon: f64, lat: f64) -> String {
    const ALPHABET: &[u8] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let bits = encode_in((-180.0, 180.0), (-90.0, 90.0), lon, lat, 26).map_or(0, |h| h.bits);
    (0..11)
        .map(|i| {
            let idx = if i == 10 {
                0
            } else {
                (bits >> (52 - (i + 1) * 5)) & 0x1f
            };
            ALPHABET[idx as usize] as char
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis's documented example: Palermo and Catania.
    #[test]
    fn scores_hashes_and_distances_are_redis_s() {
        let palermo = score_of(13.361389, 38.115556).unwrap();
        let catania = score_of(15.087269, 37.502669).unwrap();
        assert_eq!(palermo, 3479099956230698);
        assert_eq!(catania, 3479447370796909);
        let (lon, lat) = decode_score(palermo as f64);
        assert_eq!(format!("{lon:.17}"), "13.36138933897018433");
        assert_eq!(format!("{lat:.17}"), "38.11555639549629859");
        assert_eq!(standard_hash(lon, lat), "sqc8b49rny0");
        let (lon2, lat2) = decode_score(catania as f64);
        assert_eq!(
            format!("{:.4}", distance(lon, lat, lon2, lat2)),
            "166274.1516"
        );
        assert_eq!(score_of(200.0, 10.0), None);
        assert_eq!(score_of(10.0, 86.0), None);
    }

    #[test]
    fn interleaving_round_trips() {
        for (x, y) in [(0u32, 0u32), (1, 0), (0x3ffffff, 0x1234567), (u32::MAX, 7)] {
            let d = deinterleave64(interleave64(x, y));
            assert_eq!((d as u32, (d >> 32) as u32), (x, y));
        }
    }
}
