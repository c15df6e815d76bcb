"""Six C extensions made in a loop (torch-scatter's shape: setup.py L31-99), each compiled one file
at a time; the build_ext it uses says how many setuptools builds at once."""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class Reporting(build_ext):
    def build_extensions(self):
        print(f"many-ext: build_ext parallel={self.parallel}", flush=True)
        super().build_extensions()


setup(
    ext_modules=[Extension(f"many_ext._e{i}", [f"csrc/e{i}.c"]) for i in range(6)],
    cmdclass={"build_ext": Reporting},
)
