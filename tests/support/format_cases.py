"""Hand-worked lines per log format (presets and two real-world strings, Apache and nginx): each line with the
fields the token program gives (all of the format's fields, in order) or the reason it is malformed,
worked out by hand from the token semantics in ``logetl.formats`` (not by running code)."""

T = "17/May/2015:10:05:03 +0000"

APACHE_ISSUE = r'%v:%p %h %l %u %t \"%r\" %>s %b \"%{Referer}i\" \"%{User-Agent}i\" %D'
NGINX_ISSUE = ('$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" '
               '"$http_user_agent" $request_time "$http_x_forwarded_for"')

LONG = "a" * 100_000

# fields: ip, ident, user, time, request, response, size
COMMON = [
    ("plain", b'127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326',
     ("127.0.0.1", "-", "frank", "10/Oct/2000:13:55:36 -0700", "GET /apache_pb.gif HTTP/1.0", "200", "2326")),
    ("escaped quote inside the request",
     b'10.0.0.1 - - [' + T.encode() + b'] "GET /a\\"b HTTP/1.1" 200 5',
     ("10.0.0.1", "-", "-", T, 'GET /a\\"b HTTP/1.1', "200", "5")),
    ("escaped backslash ends the request",
     b'10.0.0.1 - - [' + T.encode() + b'] "GET /a\\\\" 200 5',
     ("10.0.0.1", "-", "-", T, "GET /a\\\\", "200", "5")),
    ("escaped backslash then escaped quote",
     b'10.0.0.1 - - [' + T.encode() + b'] "GET /a\\\\\\" x" 200 5',
     ("10.0.0.1", "-", "-", T, 'GET /a\\\\\\" x', "200", "5")),
    ("an unescaped quote ends the request (Apache never writes one)",
     b'10.0.0.1 - - [' + T.encode() + b'] "GET /a"b HTTP/1.1" 200 5', "no_match"),
    ("IPv6 client", b'2001:db8::1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 5',
     ("2001:db8::1", "-", "-", T, "GET / HTTP/1.1", "200", "5")),
    ("empty request is a field like any other",
     b'10.0.0.1 - - [' + T.encode() + b'] "" 400 0', ("10.0.0.1", "-", "-", T, "", "400", "0")),
    ("empty ip", b' - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 5', ("", "-", "-", T, "GET / HTTP/1.1", "200", "5")),
    ("size '-' parses (then is dropped)", b'10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 304 -',
     ("10.0.0.1", "-", "-", T, "GET / HTTP/1.1", "304", "-")),
    ("missing size: the status needs a space after it",
     b'10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200', "no_match"),
    ("a combined line: the size is one word, so the text after it does not match",
     b'10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 5 "-" "agent"', "no_match"),
    ("a space after the size does not match either",
     b'10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 5 ', "no_match"),
    ("an empty size at the line's end is a field like any other",
     b'10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 ', ("10.0.0.1", "-", "-", T, "GET / HTTP/1.1", "200", "")),
    ("time without brackets", b'10.0.0.1 - - ' + T.encode() + b' "GET / HTTP/1.1" 200 5', "no_match"),
    ("TAB in the user", b'10.0.0.1 - fr\tank [' + T.encode() + b'] "GET / HTTP/1.1" 200 5', "tab_or_cr_in_field"),
    ("CR inside the request", b'10.0.0.1 - - [' + T.encode() + b'] "GET /\r HTTP/1.1" 200 5', "tab_or_cr_in_field"),
    ("CRLF line end: one CR removed", b'10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 5\r',
     ("10.0.0.1", "-", "-", T, "GET / HTTP/1.1", "200", "5")),
    ("invalid UTF-8", b'10.0.0.1 - - [' + T.encode() + b'] "GET /\xff HTTP/1.1" 200 5', "invalid_utf8"),
    ("non-ASCII request", '10.0.0.1 - - [17/May/2015:10:05:03 +0000] "GET /café HTTP/1.1" 200 5'.encode(),
     ("10.0.0.1", "-", "-", T, "GET /café HTTP/1.1", "200", "5")),
    ("100 KB request", b'10.0.0.1 - - [' + T.encode() + b'] "GET /' + LONG.encode() + b' HTTP/1.1" 200 5',
     ("10.0.0.1", "-", "-", T, "GET /" + LONG + " HTTP/1.1", "200", "5")),
    ("empty line", b"", "no_match"),
]

# fields: vhost, port, ip, ident, user, time, request, response, size, referer, user_agent
VHOST_COMBINED = [
    ("plain", b'www.example.com:443 10.0.0.1 - - [' + T.encode() + b'] "GET /images/a.png HTTP/1.1" 200 123 '
              b'"https://www.example.com/" "Mozilla/5.0"',
     ("www.example.com", "443", "10.0.0.1", "-", "-", T, "GET /images/a.png HTTP/1.1", "200", "123",
      "https://www.example.com/", "Mozilla/5.0")),
    ("escaped quotes in the agent, empty referer",
     b'h:80 10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 1 "" "Mozilla \\"x\\""',
     ("h", "80", "10.0.0.1", "-", "-", T, "GET / HTTP/1.1", "200", "1", "", 'Mozilla \\"x\\"')),
    ("IPv6 client after the port", b'h:8080 ::1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 1 "-" "-"',
     ("h", "8080", "::1", "-", "-", T, "GET / HTTP/1.1", "200", "1", "-", "-")),
    ("a bracketed IPv6 vhost: the vhost ends at the last ':' before the port's ' '",
     b'[2001:db8::1]:443 10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 1 "-" "-"',
     ("[2001:db8::1]", "443", "10.0.0.1", "-", "-", T, "GET / HTTP/1.1", "200", "1", "-", "-")),
    ("an unbracketed IPv6 vhost (Apache's fallback name: the address), then an IPv6 client",
     b'2001:db8::1:80 ::1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 1 "-" "-"',
     ("2001:db8::1", "80", "::1", "-", "-", T, "GET / HTTP/1.1", "200", "1", "-", "-")),
    ("empty vhost and empty port", b': 10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 1 "-" "-"',
     ("", "", "10.0.0.1", "-", "-", T, "GET / HTTP/1.1", "200", "1", "-", "-")),
    ("no ':' before the first ' '", b'h80 10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 1 "-" "-"',
     "no_match"),
    ("a combined line without the vhost:port prefix",
     b'10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 1 "-" "-"', "no_match"),
    ("text after the agent", b'h:80 10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 1 "-" "-" 17',
     "no_match"),
    ("escaped control bytes stay as written",
     b'h:80 10.0.0.1 - - [' + T.encode() + b'] "\\x16\\x03\\x01" 400 226 "-" "-"',
     ("h", "80", "10.0.0.1", "-", "-", T, "\\x16\\x03\\x01", "400", "226", "-", "-")),
    ("invalid UTF-8 in the agent", b'h:80 10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 1 "-" "\xc3"',
     "invalid_utf8"),
    ("TAB in the agent is in a field", b'h:80 10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 1 "-" "a\tb"',
     "tab_or_cr_in_field"),
]

NGINX_FIELDS = ("ip", "user", "time", "request", "response", "size", "referer", "user_agent", "x_forwarded_for")
NGINX = [
    ("plain", b'10.0.0.1 - - [' + T.encode() + b'] "GET /images/a.png HTTP/1.1" 200 123 "-" "Mozilla/5.0" "-"',
     ("10.0.0.1", "-", T, "GET /images/a.png HTTP/1.1", "200", "123", "-", "Mozilla/5.0", "-")),
    ("nginx writes a quote as \\x22",
     b'10.0.0.1 - - [' + T.encode() + b'] "GET /a\\x22b HTTP/1.1" 200 1 "-" "-" "-"',
     ("10.0.0.1", "-", T, "GET /a\\x22b HTTP/1.1", "200", "1", "-", "-", "-")),
    ("a backslash is no escape in nginx: the quote after it ends the field",
     b'10.0.0.1 - - [' + T.encode() + b'] "GET /a\\" 200 1 "-" "-" "-"',
     ("10.0.0.1", "-", T, "GET /a\\", "200", "1", "-", "-", "-")),
    ("the literal '-' after the address is required",
     b'10.0.0.1 x - [' + T.encode() + b'] "GET / HTTP/1.1" 200 1 "-" "-" "-"', "no_match"),
    ("IPv6 client and a forwarded-for list",
     b'2001:db8::2 - bob [' + T.encode() + b'] "GET / HTTP/2.0" 200 0 "-" "-" "203.0.113.4, 10.1.1.9"',
     ("2001:db8::2", "bob", T, "GET / HTTP/2.0", "200", "0", "-", "-", "203.0.113.4, 10.1.1.9")),
    ("empty request and agent", b'10.0.0.1 - - [' + T.encode() + b'] "" 400 0 "-" "" "-"',
     ("10.0.0.1", "-", T, "", "400", "0", "-", "", "-")),
    ("a combined line lacks the forwarded-for field",
     b'10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 1 "-" "-"', "no_match"),
    ("100 KB agent", b'10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 1 "-" "' + LONG.encode() + b'" "-"',
     ("10.0.0.1", "-", T, "GET / HTTP/1.1", "200", "1", "-", LONG, "-")),
    ("overlong UTF-8", b'10.0.0.1 - - [' + T.encode() + b'] "GET /\xc0\xaf HTTP/1.1" 200 1 "-" "-" "-"',
     "invalid_utf8"),
]

# fields: vhost, port, ip, ident, user, time, request, response, size, referer, user_agent, duration_us
APACHE_ISSUE_CASES = [
    ("plain", b'www.example.com:443 10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 5 "-" "curl" 1534',
     ("www.example.com", "443", "10.0.0.1", "-", "-", T, "GET / HTTP/1.1", "200", "5", "-", "curl", "1534")),
    ("a bracketed IPv6 vhost", b'[::1]:8443 ::1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 5 "-" "curl" 9',
     ("[::1]", "8443", "::1", "-", "-", T, "GET / HTTP/1.1", "200", "5", "-", "curl", "9")),
    ("a combined line: 100% no_match before, parsed now only with the prefix",
     b'10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 5 "-" "curl" 1534', "no_match"),
    ("missing duration: the agent must be followed by a space",
     b'h:80 10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 5 "-" "curl"', "no_match"),
]

# fields: ip, user, time, request, response, size, referer, user_agent, request_time, x_forwarded_for
NGINX_ISSUE_CASES = [
    ("plain", b'10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 5 "-" "curl" 0.004 "198.51.100.7"',
     ("10.0.0.1", "-", T, "GET / HTTP/1.1", "200", "5", "-", "curl", "0.004", "198.51.100.7")),
    ("empty request time", b'10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 5 "-" "curl"  "-"',
     ("10.0.0.1", "-", T, "GET / HTTP/1.1", "200", "5", "-", "curl", "", "-")),
    ("no request time", b'10.0.0.1 - - [' + T.encode() + b'] "GET / HTTP/1.1" 200 5 "-" "curl" "-"', "no_match"),
]

CASES = {
    "common": COMMON,
    "vhost_combined": VHOST_COMBINED,
    "nginx": NGINX,
    APACHE_ISSUE: APACHE_ISSUE_CASES,
    NGINX_ISSUE: NGINX_ISSUE_CASES,
}
