use super::*;

const LIMITS: Limits = Limits {
    max_bulk: 1 << 20,
    max_query: 4 << 20,
};

#[test]
fn a_request_arrives_byte_by_byte() {
    let wire = b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n";
    let mut p = Parser::new(LIMITS);
    for end in 0..wire.len() {
        assert_eq!(
            p.parse(&wire[..end]).unwrap(),
            Parsed::Incomplete,
            "at {end}"
        );
    }
    assert_eq!(
        p.parse(wire).unwrap(),
        Parsed::Request(vec![b"GET".to_vec(), b"a".to_vec()], wire.len())
    );
}
