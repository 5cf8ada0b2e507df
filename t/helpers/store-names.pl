#!/usr/bin/perl
# SPDX-License-Identifier: BSD-3-Clause
# store-names.pl HEADER FILE...: print every string literal in the C FILEs
# that spells a name of the node store's table (HEADER, common/dsstore.h)
# instead of using its constant; exit 1 when there is one (t/0011).
#
# A literal is flagged when it builds a path to a name: "/NAME" or "%sNAME"
# (a suffix such as ".partial") followed by the end of the literal, '/' or
# '%'; or is the value of a #define or the last argument of a *join* or
# *path* function or the value of a variable called *name*; or, for names no word of English or of the command line spells
# (those with '.' or '-', and the ones listed in $bare), when it is the
# name itself.  Comments are skipped; a literal split by a macro
# ("%s/" DS_SOCK_NAME) is what is wanted and is never flagged.
use strict;
use warnings;

my ($header, @files) = @ARGV;
open(my $h, '<', $header) or die "store-names: '$header': $!\n";
my %names; # value -> macro
while (<$h>) {
	next unless /^#define\s+(DS_\w+)\s+"([^"]+)"/;
	my ($macro, $v) = ($1, $2);
	next if $macro =~ /^DS_SS_/; # keys inside serve.status, not names
	$names{$v} = $macro;
}
close($h);
die "store-names: no names in '$header'\n" unless %names;
my %bare = map { $_ => 1 } qw(osock reserved);

my $bad = 0;
for my $f (@files) {
	open(my $in, '<', $f) or die "store-names: '$f': $!\n";
	local $/;
	my $src = <$in>;
	close($in);
	# a macro of its own for a name (#define SHADOW "cwd"), a name joined
	# to a directory by a function (path_join(dir, "store")) or held in a
	# variable called *name* (store_name = "store")
	while ($src =~ m{^[ \t]*#[ \t]*define[ \t]+\w+[ \t]+"([^"]*)"|\w*(?:join|path)\w*\([^;()]*,\s*"([^"]*)"\s*\)|\w*name\w*\s*=\s*"([^"]*)"}gm) {
		my $v = defined $1 ? $1 : defined $2 ? $2 : $3;
		next unless $names{$v};
		my $at = 1 + (substr($src, 0, $-[0]) =~ tr/\n//);
		print "$f:$at: \"$v\" spells $names{$v}: use the constant\n";
		$bad = 1;
	}
	my $line = 1;
	# tokens: comments, character constants, string literals, newlines
	while ($src =~ m{(/\*.*?\*/|//[^\n]*|'(?:\\.|[^'\\\n])*'|"((?:\\.|[^"\\\n])*)"|\n)}gs) {
		my ($tok, $lit) = ($1, $2);
		if (!defined $lit) {
			$line += ($tok =~ tr/\n//);
			next;
		}
		# the shim's virtual directory in the mount (.dstage/epochs/E/all)
		# is not the store's epochs/
		next if $lit =~ m{\.dstage/};
		for my $v (keys %names) {
			my $q = quotemeta($v);
			my $path = $lit =~ m{(?:/|%s)$q(?:$|[/%])};
			my $same = $lit eq $v && ($v =~ /[.-]/ || $bare{$v});
			if ($path || $same) {
				print "$f:$line: \"$lit\" spells $names{$v} (\"$v\"): use the constant\n";
				$bad = 1;
			}
		}
	}
}
exit $bad;
