FROM ubuntu:22.04
ENV LD_LIBRARY_PATH=/usr/local/Ascend/cann-8.5.2/lib64:$LD_LIBRARY_PATH \
    PYTHONPATH=${PYTHONPATH}:/opt/src \
    PATH=/opt/bin:$PATH
ENV CPATH="/opt/inc:${CPATH}"
