"""URLs of every shape for property tests (hypothesis strategies): odd schemes, upper-case and IDNA hosts,
ports, paths, queries and fragments with characters that need escaping."""

from __future__ import annotations

import string

from hypothesis import strategies as st

label = st.text(string.ascii_lowercase + string.digits + "-", min_size=1, max_size=12)
host = st.lists(label, min_size=1, max_size=4).map(".".join)
path_chars = string.ascii_letters + string.digits + "-._~!$&'()*+,=:@/%;?#[] \u00e9"
query_chars = string.ascii_letters + string.digits + "-._~=&+%/?# \u00e9"


@st.composite
def urls(draw):
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "ftp"]))
    h = draw(st.one_of(host, host.map(str.upper), st.just("xn--bcher-kva.example")))
    port = draw(st.one_of(st.just(""), st.integers(0, 99999).map(lambda p: f":{p}")))
    path = draw(st.one_of(st.just(""), st.text(path_chars, max_size=30).map(lambda p: "/" + p)))
    query = draw(st.one_of(st.just(""), st.text(query_chars, max_size=30).map(lambda q: "?" + q)))
    frag = draw(st.one_of(st.just(""), st.text(string.printable, max_size=10).map(lambda f: "#" + f)))
    return f"{scheme}://{h}{port}{path}{query}{frag}"
