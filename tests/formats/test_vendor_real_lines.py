"""Every preset on real lines from the vendors' documentation and other parsers' test suites, with the client
address, status and bytes (and the time, where the source gives it) those sources assert: on every scanner
(the reference matcher, the generated regular expression of Spark's built-in path, the kernel in Python and
native), and through a flow on both engines, every Spark parse path. Each line keeps its source's bytes."""
from __future__ import annotations

import pytest

from conftest import parts
from test_json_formats import CADDY_DOC, NGINX_LINE, TRAEFIK_DOC
from test_vendor_formats import by_regex, kernel_fields, reference
from logetl import formats
from logetl.engines import kernel

# (spec, raw line, {field: value}): the fields the source asserts, in logetl's names
LINES = [
    # Vector's parse_aws_alb_log reference example (website/cue/reference/remap/functions/parse_aws_alb_log.cue):
    # client_host 192.168.131.39:2817, elb_status_code 200, sent_bytes 366; no target, the layout through
    # classification_reason
    ("alb", b'http 2018-11-30T22:23:00.186641Z app/my-loadbalancer/50dc6c495c0c9188 192.168.131.39:2817 - 0.000 '
            b'0.001 0.000 200 200 34 366 "GET http://www.example.com:80/ HTTP/1.1" "curl/7.46.0" - - '
            b'arn:aws:elasticloadbalancing:us-east-2:123456789012:targetgroup/my-targets/73e2d6bc24d8a067 '
            b'"Root=1-58337364-23a8c76965a2ef7629b185e3" "-" "-" 0 2018-11-30T22:22:48.364000Z "forward" "-" "-" "-" '
            b'"-" "-" "-"',
     {"ip": "192.168.131.39", "response": "200", "size": "366", "time": "2018-11-30T22:23:00.186641Z"}),
    # Filebeat's aws module test log (x-pack/filebeat/module/aws/elb/test/application-lb-http.log): a 460
    # (the client closed) with -1 timers, and a 200
    ("alb", b'http 2019-10-11T15:01:12.376735Z app/filebeat-aws-elb-test/c86a326e7dc14222 77.227.156.41:56398 '
            b'10.0.0.192:80 -1 -1 -1 460 - 125 0 "GET http://filebeat-aws-elb-test-12030537.eu-central-1.elb.'
            b'amazonaws.com:80/ HTTP/1.1" "curl/7.58.0" - - arn:aws:elasticloadbalancing:eu-central-1:627959692251:'
            b'targetgroup/test-lb-instances/8f04c4fe71f5f794 "Root=1-5da09932-2c342a443bfb96249aa50ed7" "-" "-" 0 '
            b'2019-10-11T15:01:06.657000Z "forward" "-" "-"',
     {"ip": "77.227.156.41", "response": "460", "size": "0", "time": "2019-10-11T15:01:12.376735Z"}),
    ("alb", b'http 2019-10-11T15:55:09.308183Z app/filebeat-aws-elb-test/c86a326e7dc14222 77.227.156.41:37838 '
            b'10.0.0.192:80 0.001 0.000 0.000 200 200 125 859 "GET http://filebeat-aws-elb-test-12030537.eu-central-1.'
            b'elb.amazonaws.com:80/ HTTP/1.1" "curl/7.58.0" - - arn:aws:elasticloadbalancing:eu-central-1:'
            b'627959692251:targetgroup/test-lb-instances/8f04c4fe71f5f794 "Root=1-5da0a5dd-4d9a423a0e9a782fe2f390af" '
            b'"-" "-" 0 2019-10-11T15:55:09.307000Z "forward" "-" "-"',
     {"ip": "77.227.156.41", "response": "200", "size": "859", "time": "2019-10-11T15:55:09.308183Z"}),
    # Filebeat's aws module test logs (x-pack/filebeat/module/aws/elb/test/elb-http.log and elb-tcp.log):
    # an HTTP listener's line, and a TCP listener's (no status, the request "- - - ")
    ("elb", b'2019-10-14T12:00:20.694172Z filebeat-aws-elb-test 175.16.199.1:54106 10.0.1.185:80 0.000043 0.000785 '
            b'0.000023 200 200 0 612 "GET http://18.194.223.56:80/ HTTP/1.1" "Mozilla/5.0 (Windows NT 6.1) '
            b'AppleWebKit/537.36 (KHTML, like Gecko) Chrome/41.0.2228.0 Safari/537.36" - -',
     {"ip": "175.16.199.1", "response": "200", "size": "612", "time": "2019-10-14T12:00:20.694172Z"}),
    ("elb", b'2019-10-17T13:26:14.308385Z filebeat-aws-elb-test-elb 77.227.156.41:46288 10.0.0.47:80 0.000534 '
            b'0.000011 0.000016 - - 7 343 "- - - " "-" - -',
     {"ip": "77.227.156.41", "response": "-", "size": "343", "time": "2019-10-17T13:26:14.308385Z"}),
    # Filebeat's aws module test log (x-pack/filebeat/module/aws/s3access/test/s3_server_access.log): a user
    # agent with spaces and a comma, the layout through tls_version; a batch delete (request, referer and user
    # agent a bare '-', no size)
    ("s3", b'36c1f05b76016b78528454e6e0c60e2b7ff7aa20c0a5e4c748276e5b0a2debd2 test-s3-ks [01/Aug/2019:00:24:41 +0000] '
           b'72.21.217.31 arn:aws:sts::627959692251:assumed-role/AWSServiceRoleForTrustedAdvisor/TrustedAdvisor_'
           b'627959692251_784ab70b-8cc9-4d37-a2ec-2ff4d0c08af9 44EE8651683CB4DA REST.GET.LOCATION - "GET /test-s3-ks/'
           b'?location&aws-account=627959692251 HTTP/1.1" 200 - 142 - 17 - "-" "AWS-Support-TrustedAdvisor, '
           b'aws-internal/3 aws-sdk-java/1.11.590 Linux/4.9.137-0.1.ac.218.74.329.metal1.x86_64 OpenJDK_64-Bit_'
           b'Server_VM/25.212-b03 java/1.8.0_212 vendor/Oracle_Corporation" - BsCfJedfuSnds2QFoxi+E/O7M6OEWzJnw4dUaes'
           b'/2hyA363sONRJKzB7EOY+Bt9DTHYUn+HoHxI= SigV4 ECDHE-RSA-AES128-SHA AuthHeader s3.ap-southeast-1.amazonaws.'
           b'com TLSv1.2',
     {"ip": "72.21.217.31", "response": "200", "size": "142", "time": "01/Aug/2019:00:24:41 +0000"}),
    ("s3", b'36c1f05b76016b78528454e6e0c60e2b7ff7aa20c0a5e4c748276e5b0a2debd2 jsoriano-s3-test [10/Sep/2019:15:11:07 '
           b'+0000] 77.227.156.41 arn:aws:iam::627959692251:user/jaime.soriano@elastic.co 8CD7A4A71E2E5C9E '
           b'BATCH.DELETE.OBJECT jolokia-war-1.5.0.war - 204 - - 344017 - - - - - IeDW5I3wefFxU8iHOcAzi5qr+O+1bdRlcQ0'
           b'AO2WGjFh7JwYM6qCoKq+1TrUshrXMlBxPFtg97Vk= SigV4 ECDHE-RSA-AES128-SHA AuthHeader s3.eu-central-1.'
           b'amazonaws.com TLSv1.2',
     {"ip": "77.227.156.41", "response": "204", "size": "-", "time": "10/Sep/2019:15:11:07 +0000"}),
    # the s3_access_log filter's spec of kdgm/logstash-plugins (spec/filters/s3_access_log_spec.rb), which
    # asserts the address, status and bytes of the CLF line it makes: the 18-field layout
    ("s3", b'2cf7e6b06335c0689c6d29163df5bb001c96870cd78609e3845f1ed76a632621 media.kerkdienstgemist.nl '
           b'[24/Mar/2013:10:22:56 +0000] 77.168.122.24 2cf7e6b06335c0689c6d29163df5bb001c96870cd78609e3845f1ed76a632621 '
           b'A5A6B08FB9342F4D REST.GET.OBJECT 10010160/2013-03-24-0930.mp3 "GET /10010160/2013-03-24-0930.mp3?Signature='
           b'75eBWlMvIpO357%2FqKLdn0sZRP08%3D&Expires=1364127776&AWSAccessKeyId=1VYKRTJ5FFKT5B6F4NR2 HTTP/1.1" 200 - '
           b'18547033 18547033 17344 58 "http://kerkdienstgemist.nl/mp3/recorder.php?id=452" "Mozilla/5.0 '
           b'(compatible; MSIE 9.0; Windows NT 6.1; WOW64; Trident/5.0)" -',
     {"ip": "77.168.122.24", "response": "200", "size": "18547033", "time": "24/Mar/2013:10:22:56 +0000"}),
    ("s3", b'9ab8c3813615ea8387cf4cc559958ec02531c04954bbbf924321656cc030bce3 n-e-w-legacy [04/Jun/2012:16:44:26 +0000] '
           b'10.1.155.11 9ab8c3813615ea8387cf4cc559958ec02531c04954bbbf924321656cc030bce3 2B8A7289376A942E '
           b'REST.GET.LOGGING_STATUS - "GET /n-e-w-legacy?logging HTTP/1.1" 200 - 239 - 8 - "-" "S3Console/0.4" -',
     {"ip": "10.1.155.11", "response": "200", "size": "239", "time": "04/Jun/2012:16:44:26 +0000"}),
    # Filebeat's haproxy module test log (filebeat/module/haproxy/log/test/haproxy.log): captured headers
    # holding '|', a frontend ending in '~' (TLS)
    ("haproxy", b'Jul 30 09:03:52 localhost haproxy[32450]: 1.2.3.4:38862 [30/Jul/2018:09:03:52.726] incoming~ '
                b'docs_microservice/docs 0/0/1/0/2 304 168 - - ---- 6/6/0/0/0 0/0 {docs.example.internal||} {|||} '
                b'"GET /component---src-pages-index-js-4b15624544f97cf0bb8f.js HTTP/1.1"',
     {"ip": "1.2.3.4", "response": "304", "size": "168", "time": "30/Jul/2018:09:03:52.726"}),
    # the web distribution fixture of claygregory/node-cloudfront-log-parser (test/fixtures/web-1-0.txt, the
    # example of AWS's CloudFront guide; 24 fields), its two header lines first
    ("cloudfront", b"#Version: 1.0", "header"),
    ("cloudfront", b"#Fields: date time x-edge-location sc-bytes c-ip cs-method cs(Host) cs-uri-stem sc-status "
                   b"cs(Referer) cs(User-Agent) cs-uri-query cs(Cookie) x-edge-result-type x-edge-request-id "
                   b"x-host-header cs-protocol cs-bytes time-taken x-forwarded-for ssl-protocol ssl-cipher "
                   b"x-edge-response-result-type cs-protocol-version", "header"),
    ("cloudfront", b"2014-05-23\t01:13:11\tFRA2\t182\t192.0.2.10\tGET\td111111abcdef8.cloudfront.net\t/view/my/file.html"
                   b"\t200\twww.displaymyfiles.com\tMozilla/5.0%2520(iPhone;%2520CPU%2520iPhone%2520OS%252010_2_1%2520"
                   b"like%2520Mac%2520OS%2520X)%2520AppleWebKit/602.4.6%2520(KHTML,%2520like%2520Gecko)%2520Version/"
                   b"10.0%2520Mobile/14D27%2520Safari/602.1\t-\tzip=98101\tRefreshHit\tMRVMF7KydIvxMWfJIglgwHQwZsbG2IhRJ"
                   b"07sn9AkKUFSHS9EXAMPLE==\td111111abcdef8.cloudfront.net\thttp\t-\t0.001\t-\t-\t-\tRefreshHit\tHTTP/1.1",
     {"ip": "192.0.2.10", "response": "200", "size": "182", "date": "2014-05-23", "time": "01:13:11"}),
    ("cloudfront", b"2014-05-23\t01:13:12\tLAX1\t2390282\t192.0.2.202\tGET\td111111abcdef8.cloudfront.net\t/soundtrack/"
                   b"happy.mp3\t304\twww.unknownsingers.com\tMozilla/5.0%2520(iPhone;%2520CPU%2520iPhone%2520OS%2520"
                   b"10_2_1%2520like%2520Mac%2520OS%2520X)%2520AppleWebKit/602.4.6%2520(KHTML,%2520like%2520Gecko)%2520"
                   b"Version/10.0%2520Mobile/14D27%2520Safari/602.1\ta=b&c=d\tzip=50158\tHit\txGN7KWpVEmB9Dp7ctcVFQC4E-"
                   b"nrcOcEKS3QyAez--06dV7TEXAMPLE==\td111111abcdef8.cloudfront.net\thttp\t-\t0.002\t-\t-\t-\tHit\t"
                   b"HTTP/1.1",
     {"ip": "192.0.2.202", "response": "304", "size": "2390282", "date": "2014-05-23", "time": "01:13:12"}),
    # the example in adamvr/node-log-dissector's CloudFront dissector (dissectors/cloudfront.js): the 19-field
    # layout of 2015
    ("cloudfront", b"2015-01-28\t18:41:47\tLHR5\t4082\t195.214.31.26\tGET\te3lkfdfzknjs2t.cloudfront.net\t/buto/europe/"
                   b"videos/Ft5xk/1/BFSdb/BFSdb_thumbnail_large_50.jpg\t200\t-\tcurl/7.35.0\t-\t-\tHit\tgq6qEMK_nqhjDM4m"
                   b"XDZWGgoh_xxOClMJIwlGbGJt9TmZSIjOJmxLWg==\te3lkfdfzknjs2t.cloudfront.net\thttps\t154\t0.001",
     {"ip": "195.214.31.26", "response": "200", "size": "4082", "date": "2015-01-28", "time": "18:41:47"}),
    # the access-log example of IBM HTTP Server's documentation (a mod_ssl cipher as %{HTTPS_CIPHER}e after
    # the common layout)
    ('%h %l %u %t "%r" %>s %b %{HTTPS_CIPHER}e',
     b'9.48.108.152 - - [17/Feb/2005:15:37:39 -0500] "GET / HTTP/1.1" 200 1507 SSL_RSA_WITH_RC4_128_SHA',
     {"ip": "9.48.108.152", "response": "200", "size": "1507", "time": "17/Feb/2005:15:37:39 -0500",
      "env_https_cipher": "SSL_RSA_WITH_RC4_128_SHA"}),
]
#: the JSON-lines presets' real lines (their sources in test_json_formats): kernel paths only (Spark's
#: built-in regular expressions do not read JSON)
JSON_LINES = [
    ("caddy", CADDY_DOC, {"ip": "127.0.0.1", "response": "200", "size": "10900", "time": "1646861401.5241024"}),
    ("traefik", TRAEFIK_DOC, {"ip": "192.168.156.1", "response": "404", "size": "75",
                              "time": "2025-02-28T12:11:34.10912886Z"}),
    ("nginx_json", NGINX_LINE, {"ip": "83.149.9.216", "response": "200", "size": "203023",
                                "time": "17/May/2015:10:05:03 +0000"}),
]


def _fields(fmt, raw):
    got = reference(fmt, raw)
    return got if not isinstance(got, tuple) else dict(zip(fmt.fields, got))


@pytest.mark.parametrize("spec,raw,expected", LINES + JSON_LINES,
                         ids=[f"{s}-{i}" for i, (s, _, _) in enumerate(LINES + JSON_LINES)])
def test_each_real_line_gives_its_sources_fields_on_every_scanner(spec, raw, expected):
    fmt = formats.compile_format(spec)
    got = _fields(fmt, raw)
    if isinstance(expected, dict):
        assert isinstance(got, dict), (got, fmt.why(raw))
        assert {k: got[k] for k in expected} == expected
    else:
        assert got == expected
    want = reference(fmt, raw)
    if fmt.syntax != "json":
        assert by_regex(fmt, raw) == want
    for native in (False, True) if kernel.NATIVE else (False,):
        assert kernel_fields(fmt, raw, native) == want


def test_every_preset_has_a_real_line():
    assert {s for s, _, _ in LINES + JSON_LINES} >= {*formats.VENDOR, *formats.JSON_NAMES}


def _logs(with_json: bool):
    """Per format: (log bytes, the records as `ip, response, size` TSV), the lines of LINES in order."""
    by_spec: dict = {}
    for spec, raw, expected in LINES + (JSON_LINES if with_json else []):
        log, want = by_spec.setdefault(spec, ([], []))
        log.append(raw)
        if isinstance(expected, dict):
            want.append("\t".join(expected[k] for k in ("ip", "response", "size")) + "\n")
    return {spec: (b"\n".join(log) + b"\n", "".join(want).encode()) for spec, (log, want) in by_spec.items()}


def _run(spec, log: bytes, tmp_path, engine: str, **options):
    import logetl.api as L
    from logetl.job import run_flow

    name = "log_" + "".join(c if c.isalnum() else "_" for c in spec)   # (Spark skips a file named _...)
    path = tmp_path / f"{name}.log"
    path.write_bytes(log)
    out = tmp_path / f"{name}-{engine}"
    flow = L.Flow("real_lines", [L.read(spec, fields=("ip", "response", "size")).write("output")])
    run = run_flow(flow, str(path), {"output": str(out)}, engine=engine, trap=str(out) + "-trap", **options)
    return parts(out), run


def test_a_flow_reads_the_real_lines_on_the_local_engine(tmp_path):
    for spec, (log, want) in _logs(with_json=True).items():
        got, run = _run(spec, log, tmp_path, "local")
        assert got == want, spec
        assert run.malformed == {}, spec


@pytest.mark.parametrize("parse", ["jvm", "python", "builtin"])
def test_every_spark_parse_path_reads_the_real_lines_as_the_local_engine(spark_session, tmp_path, parse):
    for spec, (log, want) in _logs(with_json=parse != "builtin").items():
        got, run = _run(spec, log, tmp_path, "spark", engine_options={"conf": {"logetl.parse": parse}})
        assert got == want, (spec, parse)
        assert run.malformed == {}, (spec, parse)
