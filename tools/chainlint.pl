#!/usr/bin/perl
# SPDX-License-Identifier: BSD-3-Clause
# tools/chainlint.pl: find the test commands whose exit status is lost.
#
#   perl tools/chainlint.pl FILE...
#
# t/0000-lint.t runs it over t/*.t, t/test-lib.sh and t/lib-*.sh; t/0016
# tests it on a table of snippets.
#
# A test body runs without `set -e` (t/test-lib.sh): its status is the
# status of its last command, so the body must be one && chain.  A command
# followed by `;` or a newline instead of &&, || or | is a broken link: the
# test passes whatever that command did.  This reads each body the way the
# shell does (quotes across lines, the '"'"' splices of a single-quoted
# body, here-documents, $(...), `...`, { } and ( ) groups, if, for, while,
# until, case, functions, pipelines, comments, line continuations) and says
# FILE:LINE and the command whose status is lost:
#
#   broken && chain   CMD; NEXT (or a newline): CMD's status is lost
#   capture           CMD; rc=$? ...: a status captured by hand; use
#                     test_status [--show FILE] N CMD (t/test-lib.sh)
#   loop              a loop whose body can fail in a pass before the last
#                     one unseen: end the body's check with || exit 1 (or
#                     || return 1 in a function)
#   exit 0            A && B || exit 0 (or return 0): a failure of A or B
#                     ends the test with success
#   parse             the body is not shell this reads (a syntax error)
#
# Not a loss, so never reported: a link after a command that cannot fail
# (an assignment without a command substitution, `:`, `true`, `wait`, a
# function definition, a compound command none of whose branches can fail
# or whose last command runs in the background), after a background job
# (`&`), after `CMD || exit N` (return N, or a group that ends so),
# `CMD || :`, `CMD || break` (continue) and `COND && break` (continue,
# exit, return); the links before an explicit failure
# (`{ echo why; exit 1; }`, `false`, `return 1`); the last command of a
# body, group, branch or case arm; a loop body that holds an exit or a
# return (not 0) or whose last list cannot fail.
#
# A deliberate break that cannot be written otherwise is marked on the line
# the finding names with a comment `# chainlint: ok (why)`; docs/HACKING.md
# says when.  Which commands define tests: test_expect_success,
# test_expect_failure, test_expect_code (the last argument, the body) and
# test_lazy_prereq (its script).  Exit status: 0 when nothing was found, 1
# when something was, 2 on a usage error or an unreadable file.
use strict;
use warnings;

my $MARKER = qr/#\s*chainlint:\s*ok\b/;

# ---- the lexer ---------------------------------------------------------------
# Works on a string and an array giving the source line of each character.
# Tokens: { k => 'w' (word) | 'op' | 'nl', v => raw text, line => first
# line, eline => last line, subs => [token lists of its $(...) and `...`],
# dq => 1 when part of it was quoted }.

sub lx_new {
	my ($s, $lines) = @_;
	return { s => $s, n => length($s), p => 0, lines => $lines, here => [],
		marks => {}, err => undef };
}

sub lx_line {
	my ($lx, $p) = @_;
	my $l = $lx->{lines};
	return $l->[$p < @$l ? $p : $#$l] // 1;
}

sub lx_err {
	my ($lx, $msg) = @_;
	$lx->{err} //= [lx_line($lx, $lx->{p}), $msg];
}

# the here-document bodies pending at a newline (the lexer is at the first
# character after it)
sub lx_heredocs {
	my $lx = shift;
	while (my $h = shift @{$lx->{here}}) {
		my ($tag, $strip, $line) = @$h;
		while (1) {
			if ($lx->{p} >= $lx->{n}) {
				$lx->{err} //= [$line, "here-document '$tag' (<<) has no end"];
				return;
			}
			my $e = index($lx->{s}, "\n", $lx->{p});
			$e = $lx->{n} if $e < 0;
			my $l = substr($lx->{s}, $lx->{p}, $e - $lx->{p});
			$lx->{p} = $e + 1;
			$l =~ s/^\t+// if $strip;
			last if $l eq $tag;
		}
	}
}

# scan a single-quoted string (at the opening quote)
sub lx_sq {
	my $lx = shift;
	my $e = index($lx->{s}, "'", $lx->{p} + 1);
	if ($e < 0) {
		lx_err($lx, "unterminated '...'");
		$e = $lx->{n} - 1;
	}
	my $t = substr($lx->{s}, $lx->{p}, $e + 1 - $lx->{p});
	$lx->{p} = $e + 1;
	return $t;
}

# scan "..." (at the opening quote); command substitutions in it go to $subs
sub lx_dq {
	my ($lx, $subs) = @_;
	my $s = $lx->{s};
	my $t = '"';
	my $start = $lx->{p}++;
	while ($lx->{p} < $lx->{n}) {
		my $c = substr($s, $lx->{p}, 1);
		if ($c eq '"') {
			$lx->{p}++;
			return $t . '"';
		} elsif ($c eq '\\') {
			$t .= substr($s, $lx->{p}, 2);
			$lx->{p} += 2;
		} elsif ($c eq '$') {
			$t .= lx_dollar($lx, $subs);
		} elsif ($c eq '`') {
			$t .= lx_backtick($lx, $subs);
		} else {
			$t .= $c;
			$lx->{p}++;
		}
	}
	$lx->{p} = $start;
	lx_err($lx, 'unterminated "..."');
	$lx->{p} = $lx->{n};
	return $t;
}

# scan `...`: its text, unescaped, is shell of its own
sub lx_backtick {
	my ($lx, $subs) = @_;
	my $s = $lx->{s};
	my $start = $lx->{p}++;
	my ($in, @lines) = ('');
	while ($lx->{p} < $lx->{n}) {
		my $c = substr($s, $lx->{p}, 1);
		if ($c eq '`') {
			$lx->{p}++;
			my $sub = lx_new($in, \@lines);
			push @$subs, lx_all($sub, $lx);
			return substr($s, $start, $lx->{p} - $start);
		}
		if ($c eq '\\' && $lx->{p} + 1 < $lx->{n} && substr($s, $lx->{p} + 1, 1) =~ /[\$`\\]/) {
			$lx->{p}++;
			$c = substr($s, $lx->{p}, 1);
		}
		$in .= $c;
		push @lines, lx_line($lx, $lx->{p});
		$lx->{p}++;
	}
	lx_err($lx, 'unterminated `...`');
	return substr($s, $start);
}

# scan a balanced ${...} or $((...)) (quotes inside skipped)
sub lx_balanced {
	my ($lx, $open, $close, $subs) = @_;
	my $s = $lx->{s};
	my $start = $lx->{p};
	my $depth = 0;
	while ($lx->{p} < $lx->{n}) {
		my $c = substr($s, $lx->{p}, 1);
		if ($c eq "'" && $open eq '{') {
			lx_sq($lx);
			next;
		} elsif ($c eq '"') {
			lx_dq($lx, $subs);
			next;
		} elsif ($c eq '\\') {
			$lx->{p} += 2;
			next;
		} elsif ($c eq '$' && $lx->{p} > $start) {
			lx_dollar($lx, $subs);
			next;
		} elsif ($c eq $open) {
			$depth++;
		} elsif ($c eq $close) {
			$depth--;
			if ($depth == 0) {
				$lx->{p}++;
				return substr($s, $start, $lx->{p} - $start);
			}
		}
		$lx->{p}++;
	}
	lx_err($lx, "unterminated $open...$close");
	return substr($s, $start);
}

# scan a $ expansion (at the $)
sub lx_dollar {
	my ($lx, $subs) = @_;
	my $s = $lx->{s};
	my $start = $lx->{p};
	my $next = substr($s, $lx->{p} + 1, 2);
	if ($next eq '((') {
		$lx->{p}++;
		lx_balanced($lx, '(', ')', $subs);
	} elsif (substr($next, 0, 1) eq '(') {
		$lx->{p} += 2;
		push @$subs, lx_until_close($lx);
	} elsif (substr($next, 0, 1) eq '{') {
		$lx->{p}++;
		lx_balanced($lx, '{', '}', $subs);
	} elsif (substr($s, $lx->{p} + 1) =~ /^([A-Za-z_][A-Za-z0-9_]*|[0-9?!#\$*@-])/) {
		$lx->{p} += 1 + length($1);
	} else {
		$lx->{p}++;
	}
	return substr($s, $start, $lx->{p} - $start);
}

# the tokens of $(...) up to its closing parenthesis (consumed); a `)` that
# closes a case pattern does not close it
sub lx_until_close {
	my $lx = shift;
	my ($depth, $cases, @toks) = (0, 0);
	while (defined(my $t = lx_token($lx))) {
		if ($t->{k} eq 'op' && $t->{v} eq '(') {
			$depth++;
		} elsif ($t->{k} eq 'op' && $t->{v} eq ')') {
			if ($depth > 0) {
				$depth--;
			} elsif ($cases == 0) {
				return \@toks;
			}
		} elsif ($t->{k} eq 'w' && !$t->{q} && $t->{v} eq 'case') {
			$cases++;
		} elsif ($t->{k} eq 'w' && !$t->{q} && $t->{v} eq 'esac') {
			$cases--;
		}
		push @toks, $t;
	}
	lx_err($lx, 'unterminated $(...)');
	return \@toks;
}

# every token of a string (for `...`); heredocs of the outer lexer too
sub lx_all {
	my ($lx, $outer) = @_;
	my @toks;
	while (defined(my $t = lx_token($lx))) {
		push @toks, $t;
	}
	$outer->{err} //= $lx->{err};
	return \@toks;
}

my %OPS = map { $_ => 1 } qw(&& || ;; << >> <& >& <> >| <<-);

sub lx_token {
	my $lx = shift;
	my $s = $lx->{s};
	while (1) {
		return undef if $lx->{p} >= $lx->{n};
		my $c = substr($s, $lx->{p}, 1);
		if ($c eq ' ' || $c eq "\t") {
			$lx->{p}++;
		} elsif ($c eq '\\' && substr($s, $lx->{p} + 1, 1) eq "\n") {
			$lx->{p} += 2;
		} elsif ($c eq '#') {
			my $e = index($s, "\n", $lx->{p});
			$e = $lx->{n} if $e < 0;
			my $comment = substr($s, $lx->{p}, $e - $lx->{p});
			$lx->{marks}{lx_line($lx, $lx->{p})} = 1 if $comment =~ $MARKER;
			$lx->{p} = $e;
		} else {
			last;
		}
	}
	my $c = substr($s, $lx->{p}, 1);
	my $line = lx_line($lx, $lx->{p});
	if ($c eq "\n") {
		$lx->{p}++;
		lx_heredocs($lx);
		return { k => 'nl', v => "\n", line => $line, eline => $line, off => $lx->{p} - 1, end => $lx->{p} };
	}
	if ($c =~ /[;&|<>()]/) {
		my $three = substr($s, $lx->{p}, 3);
		my $two = substr($s, $lx->{p}, 2);
		my $op = $three eq '<<-' ? $three : $OPS{$two} ? $two : $c;
		my $off = $lx->{p};
		$lx->{p} += length($op);
		my $t = { k => 'op', v => $op, line => $line, eline => $line, off => $off, end => $lx->{p} };
		if ($op eq '<<' || $op eq '<<-') {
			my $d = lx_token($lx);
			if (!$d || $d->{k} ne 'w') {
				lx_err($lx, 'here-document without a delimiter');
				return $t;
			}
			(my $tag = $d->{v}) =~ s/['"\\]//g;
			push @{$lx->{here}}, [$tag, $op eq '<<-', $line];
			$t->{v} .= $d->{v};
		}
		return $t;
	}
	# a word
	my ($w, $q, @subs) = ('', 0);
	my $off = $lx->{p};
	while ($lx->{p} < $lx->{n}) {
		$c = substr($s, $lx->{p}, 1);
		last if $c =~ /[ \t\n;&|<>()]/;
		if ($c eq "'") {
			$w .= lx_sq($lx);
			$q = 1;
		} elsif ($c eq '"') {
			$w .= lx_dq($lx, \@subs);
			$q = 1;
		} elsif ($c eq '\\') {
			if (substr($s, $lx->{p} + 1, 1) eq "\n") {
				$lx->{p} += 2;
				next;
			}
			$w .= substr($s, $lx->{p}, 2);
			$lx->{p} += 2;
			$q = 1;
		} elsif ($c eq '$') {
			$w .= lx_dollar($lx, \@subs);
		} elsif ($c eq '`') {
			$w .= lx_backtick($lx, \@subs);
		} else {
			$w .= $c;
			$lx->{p}++;
		}
	}
	return { k => 'w', v => $w, q => $q, line => $line, off => $off, end => $lx->{p},
		eline => lx_line($lx, $lx->{p} - 1), subs => \@subs };
}

# ---- the parser and the checks ------------------------------------------------
# A parser works on a token list; it builds, for each list of commands (a
# body, a group, a branch, a loop body, a case arm, a command
# substitution), its items (and-or lists) and checks the links between
# them.  Findings: [line, kind, text].

sub ps_new {
	my ($toks, $found) = @_;
	return { t => $toks, i => 0, found => $found };
}

sub pk { my $p = shift; return $p->{t}[$p->{i}]; }
sub nx { my $p = shift; return $p->{t}[$p->{i}++]; }

sub is_op { my ($t, $v) = @_; return $t && $t->{k} eq 'op' && $t->{v} eq $v; }
# a reserved word (only at the start of a command)
sub is_rw { my ($t, $v) = @_; return $t && $t->{k} eq 'w' && !$t->{q} && $t->{v} eq $v; }

sub skip_nl {
	my $p = shift;
	$p->{i}++ while $p->{t}[$p->{i}] && $p->{t}[$p->{i}]{k} eq 'nl';
}

sub perr {
	my ($p, $t, $msg) = @_;
	die { line => $t ? $t->{line} : ($p->{t}[-1] ? $p->{t}[-1]{eline} : 0), msg => $msg };
}

sub expect_rw {
	my ($p, $v) = @_;
	my $t = nx($p);
	perr($p, $t, "'$v' expected, found " . ($t ? "'$t->{v}'" : 'the end')) unless is_rw($t, $v);
	return $t;
}

# the checks of the command substitutions of a word
sub check_subs {
	my ($p, $w) = @_;
	for my $sub (@{$w->{subs} || []}) {
		my $q = ps_new($sub, $p->{found});
		my $items = parse_list($q, {});
		perr($q, pk($q), "unexpected '" . pk($q)->{v} . "'") if pk($q);
		check_list($q, $items);
	}
}

# a list of and-or lists, up to a reserved word in $stop (a hash), a `)`
# or `;;`, or the end; returns the items: { cmds => [commands],
# ops => [&&, ||, | between them], sep => ';' '&' "\n" or '' }
sub parse_list {
	my ($p, $stop) = @_;
	my @items;
	while (1) {
		skip_nl($p);
		my $t = pk($p);
		last if !$t;
		last if $t->{k} eq 'op' && ($t->{v} eq ')' || $t->{v} eq ';;');
		last if $t->{k} eq 'w' && !$t->{q} && $stop->{$t->{v}};
		my $item = parse_andor($p, $stop);
		$t = pk($p);
		if ($t && ($t->{k} eq 'nl' || is_op($t, ';') || is_op($t, '&'))) {
			$item->{sep} = $t->{v};
			nx($p);
		} else {
			$item->{sep} = '';
		}
		push @items, $item;
	}
	return \@items;
}

sub parse_andor {
	my ($p, $stop) = @_;
	my $item = { cmds => [], ops => [] };
	while (1) {
		push @{$item->{cmds}}, parse_command($p, $stop);
		my $t = pk($p);
		last unless $t && $t->{k} eq 'op' && ($t->{v} eq '&&' || $t->{v} eq '||' || $t->{v} eq '|');
		push @{$item->{ops}}, $t->{v};
		nx($p);
		skip_nl($p);
	}
	return $item;
}

my %REDIR = map { $_ => 1 } qw(< > >> <& >& <> >|);

sub is_redir { my $t = shift; return $t && $t->{k} eq 'op' && ($REDIR{$t->{v}} || $t->{v} =~ /^<</); }

# an IO number: digits right before a redirection (2>err)
sub is_ionum {
	my ($p, $t) = @_;
	my $n = $p->{t}[$p->{i} + 1];
	return $t->{k} eq 'w' && !$t->{q} && $t->{v} =~ /^[0-9]+$/ && is_redir($n) && $n->{off} == $t->{end};
}

# one redirection at the parser's position, consumed: its last token, or
# undef when there is none
sub parse_redir {
	my $p = shift;
	my $t = pk($p);
	return undef unless $t;
	nx($p) if is_ionum($p, $t);
	$t = pk($p);
	return undef unless is_redir($t);
	nx($p);
	return $t unless $REDIR{$t->{v}};
	my $target = nx($p);
	perr($p, $target, "a file name expected after '$t->{v}'") unless $target && $target->{k} eq 'w';
	check_subs($p, $target);
	return $target;
}

# redirections after a compound command
sub parse_redirs {
	my ($p, $cmd) = @_;
	while (1) {
		my $t = pk($p);
		last unless $t && (is_redir($t) || is_ionum($p, $t));
		$cmd->{eline} = parse_redir($p)->{eline};
	}
	return $cmd;
}

my %CLOSE = map { $_ => 1 } qw(then elif else fi do done esac } in);

# The compound commands, each parsed after its first token ($t, consumed):
# { kind => group|subshell|if|while|until|for|case, line, eline, bodies =>
# [every item list], branches => [the lists whose last command's status is
# the command's], loop => the body of a loop, text => what a finding shows }

sub parse_subshell {
	my ($p, $t) = @_;
	my $items = parse_list($p, {});
	my $e = nx($p);
	perr($p, $e, "')' expected") unless is_op($e, ')');
	return { kind => 'subshell', line => $t->{line}, eline => $e->{eline},
		bodies => [$items], branches => [$items], text => '( ... )' };
}

sub parse_group {
	my ($p, $t) = @_;
	my $items = parse_list($p, { '}' => 1 });
	my $e = expect_rw($p, '}');
	return { kind => 'group', line => $t->{line}, eline => $e->{eline},
		bodies => [$items], branches => [$items], text => '{ ... }' };
}

sub parse_if {
	my ($p, $t) = @_;
	my (@bodies, @branches);
	while (1) {
		push @bodies, parse_list($p, { then => 1 });
		expect_rw($p, 'then');
		push @bodies, parse_list($p, { elif => 1, else => 1, fi => 1 });
		push @branches, $bodies[-1];
		my $n = nx($p);
		next if is_rw($n, 'elif');
		if (is_rw($n, 'else')) {
			push @bodies, parse_list($p, { fi => 1 });
			push @branches, $bodies[-1];
			$n = expect_rw($p, 'fi');
		} elsif (!is_rw($n, 'fi')) {
			perr($p, $n, "'fi' expected, found " . ($n ? "'$n->{v}'" : 'the end'));
		}
		return { kind => 'if', line => $t->{line}, eline => $n->{eline},
			bodies => \@bodies, branches => \@branches, text => 'if ... fi' };
	}
}

# while or until
sub parse_while {
	my ($p, $t) = @_;
	my $cond = parse_list($p, { do => 1 });
	expect_rw($p, 'do');
	my $body = parse_list($p, { done => 1 });
	my $e = expect_rw($p, 'done');
	return { kind => $t->{v}, line => $t->{line}, eline => $e->{eline},
		bodies => [$cond, $body], loop => $body, branches => [$body], text => "$t->{v} ... done" };
}

sub parse_for {
	my ($p, $t) = @_;
	my $name = nx($p);
	perr($p, $name, 'a name expected after for') unless $name && $name->{k} eq 'w';
	skip_nl($p);
	if (is_rw(pk($p), 'in')) {
		nx($p);
		while (my $w = pk($p)) {
			last unless $w->{k} eq 'w';
			check_subs($p, $w);
			nx($p);
		}
	}
	my $sep = pk($p);
	nx($p) if $sep && (is_op($sep, ';') || $sep->{k} eq 'nl');
	skip_nl($p);
	expect_rw($p, 'do');
	my $body = parse_list($p, { done => 1 });
	my $e = expect_rw($p, 'done');
	return { kind => 'for', line => $t->{line}, eline => $e->{eline},
		bodies => [$body], loop => $body, branches => [$body], text => "for $name->{v} ... done" };
}

sub parse_case {
	my ($p, $t) = @_;
	my $subj = nx($p);
	check_subs($p, $subj) if $subj;
	skip_nl($p);
	expect_rw($p, 'in');
	my @bodies;
	while (1) {
		skip_nl($p);
		my $n = pk($p);
		perr($p, $n, "'esac' expected, found the end") unless $n;
		last if is_rw($n, 'esac');
		nx($p) if is_op($n, '(');
		# the pattern, up to its `)`
		while (1) {
			my $w = nx($p);
			perr($p, $w, 'a case pattern expected') unless $w && ($w->{k} eq 'w' || is_op($w, '|'));
			last if is_op(pk($p), ')');
		}
		nx($p);
		# an arm: up to ;; or esac
		push @bodies, parse_list($p, { esac => 1 });
		nx($p) if is_op(pk($p), ';;');
	}
	my $e = nx($p);
	return { kind => 'case', line => $t->{line}, eline => $e->{eline},
		bodies => \@bodies, branches => \@bodies, text => 'case ... esac' };
}

my %COMPOUND = ('{' => \&parse_group, if => \&parse_if, while => \&parse_while,
	until => \&parse_while, for => \&parse_for, case => \&parse_case);

# a simple command: words and redirections up to an operator;
# { kind => 'simple', words => [...], line, eline, text }
sub parse_simple {
	my ($p, $t) = @_;
	my @words;
	my $last = $t;
	while (my $w = pk($p)) {
		if (is_redir($w) || is_ionum($p, $w)) {
			$last = parse_redir($p);
			next;
		}
		last unless $w->{k} eq 'w';
		check_subs($p, $w);
		push @words, $w;
		$last = $w;
		nx($p);
	}
	return { kind => 'simple', words => \@words, line => $t->{line}, eline => $last->{eline},
		text => join(' ', map { $_->{v} } @words) };
}

# one command (bang => 1 after a `!`): a compound command with its
# redirections, a function definition (kind => 'func', its body's lists),
# or a simple command
sub parse_command {
	my ($p, $stop) = @_;
	my $t = pk($p);
	perr($p, $t, 'a command expected, found the end') unless $t;
	if (is_rw($t, '!')) {
		nx($p);
		my $c = parse_command($p, $stop);
		$c->{bang} = 1;
		return $c;
	}
	if (is_op($t, '(')) {
		nx($p);
		return parse_redirs($p, parse_subshell($p, $t));
	}
	perr($p, $t, "unexpected '" . ($t->{v} eq "\n" ? 'newline' : $t->{v}) . "'") if $t->{k} ne 'w';
	my $v = $t->{q} ? '' : $t->{v};
	if (my $f = $COMPOUND{$v}) {
		nx($p);
		return parse_redirs($p, $f->($p, $t));
	}
	# a function definition: NAME ( ) body
	if (is_op($p->{t}[$p->{i} + 1], '(') && is_op($p->{t}[$p->{i} + 2], ')')) {
		nx($p) for 1 .. 3;
		skip_nl($p);
		my $body = parse_command($p, $stop);
		return { kind => 'func', line => $t->{line}, eline => $body->{eline},
			bodies => $body->{bodies}, loop => $body->{loop}, text => "$t->{v}() { ... }" };
	}
	perr($p, $t, "unexpected '$v'") if $CLOSE{$v} && $v ne 'in';
	return parse_simple($p, $t);
}

# The outcomes of a command for the list it is in: [z, nz], whether it
# can go on with status 0 and whether with a status not 0.  An exit, a
# return, a break or a continue does not go on: [0, 0].
sub outcome {
	my $c = shift;
	my $o;
	if ($c->{kind} eq 'func') {
		$o = [1, 0];
	} elsif ($c->{kind} eq 'group' || $c->{kind} eq 'subshell') {
		my $b = $c->{bodies}[0];
		$o = @$b && $b->[-1]{sep} ne '&' ? item_outcome($b->[-1]) : [1, 0];
		$o = [1, 0] if @$b && item_cannot_fail($b->[-1]);
		# an exit leaves a subshell only
		$o = [1, 1] if $c->{kind} eq 'subshell' && !$o->[0] && !$o->[1];
	} elsif ($c->{branches}) {
		# if, case, loops: 0 when no branch runs
		$o = [1, 0];
		for my $b (@{$c->{branches}}) {
			$o->[1] ||= @$b && $b->[-1]{sep} ne '&' && !item_cannot_fail($b->[-1]);
		}
	} else {
		my @w = map { $_->{v} } @{$c->{words}};
		if (cannot_fail($c)) {
			$o = [1, 0];
		} elsif (jumps($c)) {
			$o = [0, 0];
		} elsif (@w == 1 && $w[0] eq 'false') {
			$o = [0, 1];
		} else {
			$o = [1, 1];
		}
	}
	return $c->{bang} && ($o->[0] || $o->[1]) ? [$o->[1], $o->[0]] : $o;
}

# the outcomes of an and-or list: its pipelines (each the outcome of its
# last command; `! A | B` negates B's) joined by && and ||
sub item_outcome {
	my $it = shift;
	my @c = @{$it->{cmds}};
	my ($o, $op, $start);
	$start = 0;
	for my $k (0 .. $#c) {
		next if $k < $#c && $it->{ops}[$k] eq '|';
		my $n = outcome($c[$k]);
		$n = [$n->[1], $n->[0]] if $start < $k && $c[$start]{bang} && ($n->[0] || $n->[1]);
		if (!defined $o) {
			$o = $n;
		} elsif ($op eq '&&') {
			$o = [$o->[0] && $n->[0], $o->[1] || ($o->[0] && $n->[1])];
		} else {
			$o = [$o->[0] || ($o->[1] && $n->[0]), $o->[1] && $n->[1]];
		}
		$op = $it->{ops}[$k] if $k < $#c;
		$start = $k + 1;
	}
	return [$o->[0] ? 1 : 0, $o->[1] ? 1 : 0];
}

# a simple command whose status is always 0: `:`, `true`, `wait`,
# assignments without a command substitution
sub cannot_fail {
	my $c = shift;
	return 0 unless $c->{kind} eq 'simple' && !$c->{bang};
	my @w = @{$c->{words}};
	# (wait without an operand: 0, POSIX)
	return 1 if @w == 1 && $w[0]{v} =~ /^(:|true|wait)$/;
	return 0 unless @w;
	for my $w (@w) {
		return 0 unless $w->{v} =~ /^[A-Za-z_][A-Za-z0-9_]*=/ && !@{$w->{subs}};
	}
	return 1;
}

# an explicit failure: false, exit N or return N (N not 0)
sub fails {
	my $c = shift;
	return 0 unless $c->{kind} eq 'simple' && !$c->{bang};
	my @w = map { $_->{v} } @{$c->{words}};
	return 0 unless @w;
	return 1 if $w[0] eq 'false' && @w == 1;
	return 1 if ($w[0] eq 'exit' || $w[0] eq 'return') && (@w == 1 || $w[1] ne '0');
	return 0;
}

# break, continue, exit or return
sub jumps {
	my $c = shift;
	return $c->{kind} eq 'simple' && !$c->{bang} && @{$c->{words}}
		&& $c->{words}[0]{v} =~ /^(break|continue|exit|return)$/;
}

# an and-or list whose status is 0 whenever the list goes on after it, or
# is a condition: `:`, an assignment, `CMD || :`, `CMD || exit 1`,
# `CMD || { ...; return 1; }`, `CMD || break`, `COND && break` (continue,
# exit, return), a compound command none of whose branches can fail
sub item_cannot_fail {
	my $it = shift;
	my $n = @{$it->{cmds}};
	return 1 if $n > 1 && $it->{ops}[-1] eq '&&' && jumps($it->{cmds}[-1]);
	return !item_outcome($it)->[1];
}

sub item_fails {
	my $it = shift;
	return @{$it->{cmds}} == 1 && fails($it->{cmds}[0]);
}

# does a command (with what it holds) read $?
sub reads_status {
	my $c = shift;
	for my $w (@{$c->{words} || []}) {
		return 1 if $w->{v} =~ /\$\?|\$\{\?\}/;
	}
	for my $b (@{$c->{bodies} || []}) {
		for my $it (@$b) {
			for my $cc (@{$it->{cmds}}) {
				return 1 if reads_status($cc);
			}
		}
	}
	return 0;
}

# does a list hold an exit or a return (not 0) anywhere
sub holds_exit {
	my $items = shift;
	for my $it (@$items) {
		for my $c (@{$it->{cmds}}) {
			if ($c->{kind} eq 'simple') {
				my @w = map { $_->{v} } @{$c->{words}};
				return 1 if @w && ($w[0] eq 'exit' || $w[0] eq 'return') && (@w == 1 || $w[1] ne '0');
			}
			for my $b (@{$c->{bodies} || []}) {
				return 1 if holds_exit($b);
			}
		}
	}
	return 0;
}

sub short {
	my $s = shift;
	$s =~ s/\s+/ /g;
	return length($s) > 70 ? substr($s, 0, 67) . '...' : $s;
}

sub cmd_text {
	my $c = shift;
	return ($c->{bang} ? '! ' : '') . $c->{text};
}

sub item_text {
	my $it = shift;
	my @c = @{$it->{cmds}};
	my $s = cmd_text($c[0]);
	$s .= " $it->{ops}[$_ - 1] " . cmd_text($c[$_]) for 1 .. $#c;
	return $s;
}

sub found {
	my ($p, $line, $kind, $text) = @_;
	push @{$p->{found}}, [$line, $kind, short($text)];
}

# A && B || exit 0: a failure of A ends the test with success
sub check_exit0 {
	my ($p, $it) = @_;
	my $ands = 0;
	for my $k (1 .. $#{$it->{cmds}}) {
		my $op = $it->{ops}[$k - 1];
		$ands++ if $op eq '&&';
		my $c = $it->{cmds}[$k];
		next unless $op eq '||' && $ands && jumps($c) && $c->{words}[0]{v} =~ /^(exit|return)$/
			&& @{$c->{words}} > 1 && $c->{words}[1]{v} eq '0';
		found($p, $c->{eline}, 'exit 0', item_text($it));
	}
}

sub check_list {
	my ($p, $items) = @_;
	for my $i (0 .. $#$items) {
		my $it = $items->[$i];
		for my $c (@{$it->{cmds}}) {
			check_list($p, $_) for @{$c->{bodies} || []};
			check_loop($p, $c) if $c->{loop};
		}
		check_exit0($p, $it);
		next if $i == $#$items;
		next if $it->{sep} eq '&' || item_cannot_fail($it);
		# the links before an explicit failure do not matter
		next if grep { item_fails($items->[$_]) } $i + 1 .. $#$items;
		my $line = $it->{cmds}[-1]{eline};
		if (reads_status($items->[$i + 1]{cmds}[0])) {
			found($p, $line, 'capture', item_text($it));
		} else {
			found($p, $line, 'broken && chain', item_text($it));
		}
	}
}

sub check_loop {
	my ($p, $c) = @_;
	my $body = $c->{loop};
	return unless @$body;
	return if holds_exit($body);
	# the body's status is its last list's (the others: check_list)
	my $last = $body->[-1];
	# CMD || break ends the loop with 0: CMD's failure is lost too
	my $breaks = @{$last->{cmds}} > 1 && $last->{ops}[-1] eq '||' && jumps($last->{cmds}[-1])
		&& $last->{cmds}[-1]{words}[0]{v} =~ /^(break|continue)$/;
	return if !$breaks && (item_cannot_fail($last) || $last->{sep} eq '&');
	found($p, $last->{cmds}[-1]{eline}, 'loop', item_text($last));
}

# ---- test bodies in a script ----------------------------------------------------

# the value of a word after quote removal, with the source line of each
# character; $... and `...` stay as they are written
sub unquote {
	my ($s, $lines_of, $base) = @_;
	my ($out, @lines) = ('');
	my $p = 0;
	my $ln = sub { return $lines_of->($base + $_[0]); };
	while ($p < length($s)) {
		my $c = substr($s, $p, 1);
		if ($c eq "'") {
			my $e = index($s, "'", $p + 1);
			$e = length($s) if $e < 0;
			for my $k ($p + 1 .. $e - 1) {
				$out .= substr($s, $k, 1);
				push @lines, $ln->($k);
			}
			$p = $e + 1;
		} elsif ($c eq '"') {
			$p++;
			while ($p < length($s) && substr($s, $p, 1) ne '"') {
				my $d = substr($s, $p, 1);
				if ($d eq '\\' && substr($s, $p + 1, 1) =~ /[\$`"\\\n]/) {
					$p++;
					$d = substr($s, $p, 1);
					if ($d eq "\n") {
						$p++;
						next;
					}
				}
				$out .= $d;
				push @lines, $ln->($p);
				$p++;
			}
			$p++;
		} elsif ($c eq '\\') {
			$p++;
			if (substr($s, $p, 1) ne "\n") {
				$out .= substr($s, $p, 1);
				push @lines, $ln->($p);
			}
			$p++;
		} else {
			$out .= $c;
			push @lines, $ln->($p);
			$p++;
		}
	}
	return ($out, \@lines);
}

my %TESTCMD = (test_expect_success => 1, test_expect_failure => 1, test_expect_code => 1,
	test_lazy_prereq => 1);

# every simple command of a token list (at any depth: loops, functions)
# that defines a test
sub test_commands {
	my ($toks, $out) = @_;
	my $start = 1;
	for (my $i = 0; $i < @$toks; $i++) {
		my $t = $toks->[$i];
		if ($t->{k} ne 'w') {
			$start = 1;
			next;
		}
		if ($start && !$t->{q} && $TESTCMD{$t->{v}}) {
			my @args;
			my $j = $i + 1;
			while ($j < @$toks && $toks->[$j]{k} eq 'w') {
				push @args, $toks->[$j++];
			}
			push @$out, [$t, \@args];
			$i = $j - 1;
			$start = 0;
			next;
		}
		$start = !$t->{q} && $t->{v} =~ /^(then|do|else|elif|if|while|until|\{|!)$/ ? 1 : 0;
	}
}

sub lint_file {
	my ($file, $out) = @_;
	open(my $fh, '<', $file) or do { print STDERR "chainlint: $file: $!\n"; return -1; };
	my $src = do { local $/; <$fh> };
	close($fh);
	my @lines;
	my $ln = 1;
	for my $k (0 .. length($src) - 1) {
		push @lines, $ln;
		$ln++ if substr($src, $k, 1) eq "\n";
	}
	my $lx = lx_new($src, \@lines);
	my $toks = lx_all($lx, $lx);
	my $n = 0;
	if ($lx->{err}) {
		push @$out, "$file:$lx->{err}[0]: parse: $lx->{err}[1]";
		return 1;
	}
	my @cmds;
	test_commands($toks, \@cmds);
	for my $tc (@cmds) {
		my ($cmd, $args) = @$tc;
		next if @$args < 2;
		# the body: test_lazy_prereq NAME 'script' ['what it means']
		my $body = $cmd->{v} eq 'test_lazy_prereq' ? $args->[1] : $args->[-1];
		my ($text, $blines) = unquote(substr($src, $body->{off}, $body->{end} - $body->{off}),
			sub { return $lines[$_[0]] // $ln; }, $body->{off});
		my $blx = lx_new($text, $blines);
		my $btoks = lx_all($blx, $blx);
		my @found;
		if ($blx->{err}) {
			push @found, [$blx->{err}[0], 'parse', $blx->{err}[1]];
		} else {
			my $p = ps_new($btoks, \@found);
			my $ok = eval {
				my $items = parse_list($p, {});
				perr($p, pk($p), "unexpected '" . pk($p)->{v} . "'") if pk($p);
				check_list($p, $items);
				1;
			};
			if (!$ok) {
				my $e = $@;
				die $e unless ref $e;
				push @found, [$e->{line}, 'parse', $e->{msg}];
			}
		}
		my %marks = (%{$blx->{marks}});
		for my $f (sort { $a->[0] <=> $b->[0] } @found) {
			next if $marks{$f->[0]} && $f->[1] ne 'parse';
			push @$out, "$file:$f->[0]: $f->[1]: $f->[2]";
			$n++;
		}
	}
	return $n;
}

if (!caller) {
	if (!@ARGV || $ARGV[0] =~ /^-/) {
		print STDERR "usage: chainlint.pl FILE...\n";
		exit 2;
	}
	my ($bad, $unreadable) = (0, 0);
	my @out;
	for my $f (@ARGV) {
		my $r = lint_file($f, \@out);
		$unreadable = 1 if $r < 0;
		$bad = 1 if $r > 0;
	}
	print "$_\n" for @out;
	exit($unreadable ? 2 : $bad ? 1 : 0);
}
1;
