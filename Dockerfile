# OmniRoute gateway image: slim, non-root, with a health check.
#   docker build -t omniroute .
#   docker run -p 20128:20128 -v "$PWD/config.yaml:/etc/omniroute/config.yaml:ro" omniroute
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install . && useradd --system --uid 10001 --home-dir /var/lib/omniroute --create-home omniroute

USER omniroute
WORKDIR /var/lib/omniroute
EXPOSE 20128
# The gateway listens on every interface inside the container; publish the port deliberately.
ENV OMNIROUTE_CONFIG=/etc/omniroute/config.yaml
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:20128/health', timeout=2).status == 200 else 1)"
CMD ["omniroute", "serve", "--host", "0.0.0.0", "--port", "20128"]
