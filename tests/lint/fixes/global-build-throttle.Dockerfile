FROM ubuntu:22.04
ENV MAX_JOBS=1 \
    MAKEFLAGS="-j1" \
    LANG=C.UTF-8
RUN apt-get update && apt-get install -y --no-install-recommends build-essential && \
    rm -rf /var/lib/apt/lists/*
RUN pip install --no-cache-dir -v -e /src/vllm-ascend --no-build-isolation
RUN --mount=type=cache,target=/root/.cache/pip pip install -v -e /src/other
ENV CMAKE_BUILD_PARALLEL_LEVEL=1
CMD ["/bin/bash"]
