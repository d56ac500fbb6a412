# shareproxy: share groups (KIP-932) for Kafka clusters that do not have them.
#   docker build -t shareproxy:0.1.0 .
#   docker run --rm -p 9092:9092 -p 8080:8080 \
#     -e SHAREPROXY_BOOTSTRAP_SERVERS=kafka:9092 \
#     -e SHAREPROXY_STATE_URL=postgresql://user:pass@db/shareproxy \
#     -e SHAREPROXY_ADVERTISED_LISTENER=proxy-host:9092 shareproxy:0.1.0
# The image runs `shareproxy serve`, which migrates the store on start; to migrate as a separate
# step, run the image with `migrate` and start the server with `serve --no-migrate`.

FROM python:3.11.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY shareproxy ./shareproxy
COPY migrations ./migrations
COPY spark ./spark
COPY dashboards ./dashboards
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11.11-slim-bookworm
# the version is shareproxy.__version__'s (tests/unit/test_release_files.py holds them equal)
LABEL org.opencontainers.image.title="shareproxy" \
      org.opencontainers.image.description="Share groups (KIP-932) for Kafka clusters that do not have them" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels \
    && groupadd --system --gid 10001 shareproxy \
    && useradd --system --uid 10001 --gid shareproxy --home-dir /var/lib/shareproxy \
       --create-home shareproxy
USER 10001:10001
WORKDIR /var/lib/shareproxy
ENV SHAREPROXY_LISTEN=0.0.0.0:9092 \
    SHAREPROXY_ADMIN_LISTEN=0.0.0.0:8080 \
    SHAREPROXY_LOG_FORMAT=json \
    PYTHONUNBUFFERED=1
EXPOSE 9092 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/readyz', timeout=4)"]
ENTRYPOINT ["shareproxy"]
CMD ["serve"]
