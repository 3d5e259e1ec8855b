"""Sphinx configuration of the course book (``make book``; tools/book.py writes the sources it reads).

Sphinx with MyST-NB reads the lessons as executed notebooks, Furo lays out the pages, and MathJax is
served from the book itself (sphinx-mathjax-offline): no page loads anything from the network.
"""
project = "scratchnorm: the course"
author = "the scratchnorm authors"
extensions = [
    "myst_nb",                  # notebooks (the lessons, executed by tools/book.py) and MyST markdown
    "sphinx.ext.autodoc",       # the API pages, from the docstrings
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",   # MathJax copied into _static: math renders offline
]
myst_enable_extensions = ["dollarmath", "amsmath"]   # $...$ and $$...$$ in the lessons' markdown cells
nb_execution_mode = "off"         # tools/book.py ran each lesson once; the pages show that run's outputs
nb_merge_streams = True
exclude_patterns = ["downloads/**", "**.ipynb_checkpoints"]
html_theme = "furo"
html_title = "scratchnorm: the course"
html_static_path = ["_static", "../.book/src/_static"]   # ours; the thumbnails of this build
html_css_files = ["book.css"]
html_last_updated_fmt = None
autodoc_member_order = "bysource"
autodoc_typehints = "none"        # the signatures show the names; the docstrings say the shapes
add_module_names = False
# The library's docstrings are written to be read as plain text beside the code (shapes in comments,
# formulas in ASCII), not as reStructuredText: show them, and don't fail on their markup.
suppress_warnings = ["docutils", "myst.header", "misc.highlighting_failure"]
html_favicon = "_static/favicon.svg"     # a favicon of its own: the browser asks for one
