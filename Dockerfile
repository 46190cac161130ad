# The leapcount node image: the static binary and a link to it (/bin/ratelimit), nothing
# else. No base image is pulled: `make image` builds bin/leapcount-node on the host
# (CGO_ENABLED=0 -trimpath) and this file only copies it in.
FROM scratch
COPY bin/leapcount-node /leapcount-node
# /bin/ratelimit links to it: run under that name it is `leapcount-node ratelimit`
# (envoyproxy/ratelimit's environment), so a deployment that runs envoyproxy/ratelimit's
# command (Envoy Gateway's does) needs only this image (docs/envoy.md).
COPY deploy/image/ /
# Inside a container the node listens on every interface; peers need --advertise (the
# host name they reach it by, e.g. the compose service name).
ENV LEAPCOUNT_HTTP=0.0.0.0:8080 \
    LEAPCOUNT_RESP=0.0.0.0:6380 \
    LEAPCOUNT_GOSSIP=0.0.0.0:7946 \
    LEAPCOUNT_RPC=0.0.0.0:7947
EXPOSE 8080 6380 7946 7946/udp 7947
# No shell in the image: the binary checks itself (GET /readyz on LEAPCOUNT_HTTP's port).
HEALTHCHECK --interval=5s --timeout=4s --start-period=10s --retries=6 CMD ["/leapcount-node", "healthcheck"]
USER 65534:65534
ENTRYPOINT ["/leapcount-node"]
