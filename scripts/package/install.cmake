# Installing Ferry (`cmake --install BUILD --prefix P`) and its Debian package (scripts/package.sh, CPack):
#   P/bin/ferry
#   P/share/ferry/php-worker/            the PHP library; ferry finds it next to itself and tells the workers
#                                        (FERRY_PHP_WORKER), so any app can require its autoload.php
#   P/share/doc/ferry/                   README.md, LICENSE, docs/, examples/
#   P/lib/systemd/system/ferry.service   runs as the user "ferry" (created by the package's postinst)
include(GNUInstallDirs)

install(TARGETS ferry RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY php-worker/ DESTINATION ${CMAKE_INSTALL_DATADIR}/ferry/php-worker USE_SOURCE_PERMISSIONS
        PATTERN tests EXCLUDE
        PATTERN phpunit.xml EXCLUDE
        PATTERN CMakeLists.txt EXCLUDE
        PATTERN .phpunit.result.cache EXCLUDE)
install(FILES README.md LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME copyright) # where Debian looks
install(DIRECTORY docs DESTINATION ${CMAKE_INSTALL_DOCDIR})
# The examples as the repository has them, without what running them left (git-ignored: caches, sessions,
# databases, the RPC socket).
install(DIRECTORY examples DESTINATION ${CMAKE_INSTALL_DOCDIR} USE_SOURCE_PERMISSIONS
        PATTERN var EXCLUDE
        PATTERN storage EXCLUDE
        PATTERN "*.sqlite" EXCLUDE
        PATTERN .ferry.sock EXCLUDE
        PATTERN .gitignore EXCLUDE
        PATTERN node_modules EXCLUDE)
install(FILES scripts/package/ferry.service DESTINATION lib/systemd/system)

# The package: /usr/bin/ferry and the rest under /usr; its library dependencies found by dpkg-shlibdeps
# (dpkg-dev, part of build-essential), PHP's CLI for the workers, adduser for the postinst.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ferry)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "application server for PHP with long-running workers")
set(CPACK_PACKAGE_DESCRIPTION
    "Ferry keeps PHP workers alive between requests, as RoadRunner does: an HTTP/1.1 front end with static \
files, WebSockets and SSE relays each request to a supervised pool of PHP processes over pipes (RoadRunner's \
Goridge frames, so RoadRunner workers run unchanged), configured by a .rr.yaml file.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # ferry_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "Ferry developers <ferry@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION httpd)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "php8.2-cli | php-cli, adduser, media-types")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "php-msgpack")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA "${CMAKE_CURRENT_SOURCE_DIR}/scripts/package/postinst;${CMAKE_CURRENT_SOURCE_DIR}/scripts/package/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_OUTPUT_FILE_PREFIX packages)
include(CPack)
