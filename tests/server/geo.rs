//! GEO through the redis crate: points stored as sorted-set scores that
//! are Redis's own geohashes, positions, hashes and distances as Redis
//! prints them, searches by radius and box with their options, STORE, and
//! Redis's errors for bad input.

use redis::Value;

use crate::harness::{tempdir, Map, Server};
use crate::q;

fn err(c: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<Value>(c) {
        Err(e) => crate::text(&e),
        Ok(v) => panic!("{args:?} did not fail: {v:?}"),
    }
}

/// GEOADD of Palermo and Catania (Redis's documented example), and `more`.
fn sicily<'a>(more: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "GEOADD",
        "Sicily",
        "13.361389",
        "38.115556",
        "Palermo",
        "15.087269",
        "37.502669",
        "Catania",
    ];
    a.extend_from_slice(more);
    a
}

#[test]
fn points_positions_and_distances_are_redis_s() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let added: i64 = q(&mut c, &sicily(&[]));
    assert_eq!(added, 2);
    // The scores are the 52-bit geohashes Redis stores.
    assert_eq!(
        q::<String>(&mut c, &["ZSCORE", "Sicily", "Palermo"]),
        "3479099956230698"
    );
    assert_eq!(q::<String>(&mut c, &["TYPE", "Sicily"]), "zset");
    assert_eq!(
        q::<Vec<Option<Vec<String>>>>(&mut c, &["GEOPOS", "Sicily", "Palermo", "Nowhere"]),
        [
            Some(vec![
                "13.36138933897018433".to_string(),
                "38.11555639549629859".to_string()
            ]),
            None
        ]
    );
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["GEOHASH", "Sicily", "Palermo", "Catania", "x"]),
        [Some("sqc8b49rny0".into()), Some("sqdtr74hyu0".into()), None]
    );
    assert_eq!(
        q::<String>(&mut c, &["GEODIST", "Sicily", "Palermo", "Catania"]),
        "166274.1516"
    );
    assert_eq!(
        q::<String>(&mut c, &["GEODIST", "Sicily", "Palermo", "Catania", "km"]),
        "166.2742"
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["GEODIST", "Sicily", "Palermo", "x"]),
        None
    );
    // NX, XX, CH as ZADD's.
    assert_eq!(
        q::<i64>(
            &mut c,
            &["GEOADD", "Sicily", "XX", "CH", "13.4", "38.1", "Palermo"]
        ),
        1
    );
    assert_eq!(
        q::<i64>(
            &mut c,
            &["GEOADD", "Sicily", "NX", "13.5", "38.2", "Palermo"]
        ),
        0
    );
}

#[test]
fn searches_by_radius_and_box_with_their_options() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    let edges = [
        "12.758489",
        "38.788135",
        "edge1",
        "17.241510",
        "38.788135",
        "edge2",
    ];
    q::<i64>(&mut c, &sicily(&edges));
    let near: Vec<String> = q(
        &mut c,
        &["GEORADIUS", "Sicily", "15", "37", "200", "km", "ASC"],
    );
    assert_eq!(near, ["Catania", "Palermo"]);
    let with: Value = q(
        &mut c,
        &[
            "GEOSEARCH",
            "Sicily",
            "FROMLONLAT",
            "15",
            "37",
            "BYRADIUS",
            "200",
            "km",
            "ASC",
            "WITHDIST",
            "WITHHASH",
            "COUNT",
            "1",
        ],
    );
    let Value::Array(items) = with else {
        panic!("{with:?}")
    };
    assert_eq!(
        items,
        [Value::Array(vec![
            Value::BulkString(b"Catania".to_vec()),
            Value::BulkString(b"56.4413".to_vec()),
            Value::Int(3479447370796909),
        ])]
    );
    let boxed: Vec<String> = q(
        &mut c,
        &[
            "GEOSEARCH",
            "Sicily",
            "FROMLONLAT",
            "15",
            "37",
            "BYBOX",
            "400",
            "400",
            "km",
            "ASC",
        ],
    );
    assert_eq!(boxed, ["Catania", "Palermo", "edge2", "edge1"]);
    let by_member: Vec<String> = q(
        &mut c,
        &["GEORADIUSBYMEMBER", "Sicily", "Palermo", "100", "km"],
    );
    assert_eq!(by_member, ["Palermo", "edge1"]);
    // STORE keeps the scores; STOREDIST stores the distances.
    assert_eq!(
        q::<i64>(
            &mut c,
            &[
                "GEOSEARCHSTORE",
                "near",
                "Sicily",
                "FROMMEMBER",
                "Palermo",
                "BYRADIUS",
                "200",
                "km",
                "STOREDIST"
            ]
        ),
        3
    );
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "near", "Palermo"]), "0");
    assert_eq!(
        q::<i64>(
            &mut c,
            &["GEORADIUS", "Sicily", "15", "37", "1", "m", "STORE", "near"]
        ),
        0
    );
    assert_eq!(
        q::<i64>(&mut c, &["EXISTS", "near"]),
        0,
        "an empty result deletes the destination"
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["GEORADIUS_RO", "nokey", "15", "37", "1", "km"]),
        Vec::<String>::new()
    );
}

#[test]
fn bad_input_gets_redis_s_errors_and_changes_nothing() {
    let dir = tempdir();
    let s = Server::start(dir.path(), &Map::default());
    let mut c = s.client();
    q::<()>(&mut c, &["SET", "str", "x"]);
    for (args, want) in [
        (&["GEOADD", "g", "200", "100", "m"][..], "invalid longitude,latitude pair 200.000000,100.000000"),
        (&["GEOADD", "g", "NX", "XX", "1", "1", "m"][..], "syntax error"),
        (&["GEOADD", "g", "1", "1"][..], "wrong number of arguments"),
        (&["GEOADD", "str", "1", "1", "m"][..], "WRONGTYPE"),
        (&["GEODIST", "g", "a", "b", "parsecs"][..], "unsupported unit provided. please use M, KM, FT, MI"),
        (&["GEORADIUS", "g", "1", "1", "-1", "m"][..], "radius cannot be negative"),
        (&["GEORADIUS", "g", "1", "1", "x", "m"][..], "need numeric radius"),
        (&["GEORADIUS", "g", "1", "1", "1", "m", "ANY"][..], "the ANY argument requires COUNT argument"),
        (&["GEORADIUS", "g", "1", "1", "1", "m", "COUNT", "0"][..], "COUNT must be > 0"),
        (&["GEORADIUS", "g", "1", "1", "1", "m", "WITHDIST", "STORE", "d"][..], "STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options"),
        (&["GEOSEARCH", "g", "BYRADIUS", "1", "m", "ASC", "WITHDIST"][..], "exactly one of FROMMEMBER or FROMLONLAT can be specified for GEOSEARCH"),
        (&["GEOSEARCH", "g", "FROMLONLAT", "1", "1", "ASC", "x"][..], "syntax error"),
        (&["GEOSEARCH", "g", "FROMLONLAT", "1", "1", "BYBOX", "-1", "1", "m"][..], "height or width cannot be negative"),
    ] {
        let e = err(&mut c, args);
        assert!(e.contains(want), "{args:?}: {e}");
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "g"]), 0);
}
